/*
 * evalrun.kernels._token_ids: comma-separated JSON integers read into int64, for the token-id
 * lines of `evalrun detect --tokens` (evalrun/token_lines.py, which states the contract and
 * keeps a numpy fallback for installs without this module).
 *
 * Why compiled: numpy's text parser takes about 20 ns an id and cannot say whether a field was
 * valid JSON (it accepts leading zeros and clamps overflows), so the fallback runs several
 * extra passes over the text to vouch for it.  Here one pass reads every field by the JSON
 * grammar for integers (RFC 8259, section 6: an optional minus, then 0 or a non-zero digit
 * followed by digits; JSON whitespace around it) and checks the int64 range exactly; anything
 * else makes the whole call answer "in doubt", and the caller hands the lines to json.loads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline int json_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The fields of text[0:len] into out (room for cap ids); their number, or -1 when any field
 * is not a JSON integer within int64 or there are more than cap of them. */
static Py_ssize_t read_ids(const unsigned char *p, Py_ssize_t len, int64_t *out,
                           Py_ssize_t cap) {
    const unsigned char *end = p + len;
    Py_ssize_t n = 0;
    if (len == 0) return 0;
    for (;;) {
        while (p < end && json_space(*p)) p++;
        int negative = p < end && *p == '-';
        p += negative;
        if (p >= end || *p < '0' || *p > '9') return -1;
        /* the largest magnitude the sign allows: 2**63 - 1, or 2**63 */
        uint64_t limit = (uint64_t)INT64_MAX + (uint64_t)negative, value = 0;
        if (*p == '0') {
            p++;
            if (p < end && *p >= '0' && *p <= '9') return -1; /* a leading zero */
        } else {
            while (p < end && *p >= '0' && *p <= '9') {
                uint64_t digit = (uint64_t)(*p - '0');
                if (value > (limit - digit) / 10) return -1;
                value = value * 10 + digit;
                p++;
            }
        }
        while (p < end && json_space(*p)) p++;
        if (n >= cap) return -1;
        /* two's complement: 0 - 2**63 is INT64_MIN */
        out[n++] = negative ? (int64_t)(0 - value) : (int64_t)value;
        if (p == end) return n;
        if (*p != ',') return -1;
        p++;
    }
}

PyDoc_STRVAR(read_doc,
"read(text, out) -> int\n\n"
"Reads the comma-separated JSON integers of `text` (bytes) into `out` (a writable int64\n"
"buffer) and returns how many there were, or -1 when some field is not a JSON integer\n"
"within int64 (leading zeros, empty fields, fractions, anything else) or `out` is too\n"
"short.  An empty text holds none.  Releases the GIL.");

static PyObject *read_text(PyObject *self, PyObject *args) {
    Py_buffer text, out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*", &text, &out)) return NULL;
    PyObject *result = NULL;
    if (out.len % 8) {
        PyErr_Format(PyExc_ValueError, "out: %zd bytes is not a whole number of int64 items",
                     out.len);
    } else {
        Py_ssize_t n;
        Py_BEGIN_ALLOW_THREADS
        n = read_ids(text.buf, text.len, out.buf, out.len / 8);
        Py_END_ALLOW_THREADS
        result = PyLong_FromSsize_t(n);
    }
    PyBuffer_Release(&text);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"read", read_text, METH_VARARGS, read_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_token_ids",
    "Comma-separated JSON integers into int64, compiled (kernels/token_ids.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__token_ids(void) { return PyModule_Create(&module); }
