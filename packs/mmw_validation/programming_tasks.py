"""Programming problems for mmw_validation V4 (code generation), written for this pack.

The seed (000, appendix A-B, V4) uses 300 introductory APPS problems; this pack keeps the count
and the style (a short statement, standard input and output, one worked example) with problems
of its own. Each problem carries a reference solution, used only by ``generate_cases.py`` to
compute the example output printed in the prompt, so no example is typed by hand. A solution
takes the whole standard input as a string and returns what a correct program prints.
"""

from __future__ import annotations

import math
import re
from collections import Counter, deque
from dataclasses import dataclass
from heapq import heappop, heappush
from itertools import combinations, permutations
from typing import Callable


@dataclass(frozen=True)
class Task:
    slug: str
    title: str
    statement: str
    input_spec: str
    output_spec: str
    example_input: str
    solve: Callable[[str], str]


TASKS: list[Task] = []


def task(slug: str, title: str, statement: str, input_spec: str, output_spec: str, example_input: str):
    """Register a problem; the decorated function is its reference solution."""

    def register(solve: Callable[[str], str]) -> Callable[[str], str]:
        TASKS.append(Task(slug, title, statement, input_spec, output_spec, example_input, solve))
        return solve

    return register


def ints(s: str) -> list[int]:
    return [int(x) for x in s.split()]


def rows(s: str) -> list[str]:
    return s.strip("\n").split("\n")


def join(values) -> str:
    return " ".join(str(v) for v in values)


# ---------------------------------------------------------------------------------------------
# Numbers and arithmetic


@task("apple-baskets", "Apple Baskets",
      "A farmer has N apples and baskets that each hold exactly K apples. How many baskets can he fill completely, and how many apples are left over?",
      "One line with two integers N and K (0 <= N <= 10^18, 1 <= K <= 10^18).",
      "Print two integers: the number of full baskets and the number of apples left over.",
      "17 5")
def _(s):
    n, k = ints(s)
    return f"{n // k} {n % k}"


@task("book-pages", "Printing a Book",
      "A printer prints P pages per minute. How many whole minutes does it need to print a book of N pages? A started minute counts as a whole minute.",
      "One line with two integers N and P (1 <= N, P <= 10^9).",
      "Print the number of minutes.",
      "250 12")
def _(s):
    n, p = ints(s)
    return str(-(-n // p))


@task("digit-sum", "Sum of Digits",
      "Given a non-negative integer N, print the sum of its decimal digits.",
      "One line with an integer N (0 <= N < 10^100).",
      "Print the sum of the digits of N.",
      "98765")
def _(s):
    return str(sum(int(c) for c in s.strip()))


@task("digital-root", "Digital Root",
      "Repeatedly replace a number by the sum of its digits until a single digit remains. Print that digit.",
      "One line with an integer N (0 <= N < 10^1000).",
      "Print the digital root of N.",
      "493193")
def _(s):
    n = s.strip()
    while len(n) > 1:
        n = str(sum(int(c) for c in n))
    return n


@task("reverse-number", "Reverse a Number",
      "Print the digits of a positive integer in reverse order, without leading zeros.",
      "One line with an integer N (1 <= N <= 10^18).",
      "Print N with its digits reversed, as an integer (leading zeros dropped).",
      "1200340")
def _(s):
    return str(int(s.strip()[::-1]))


@task("palindrome-number", "Palindromic Number",
      "A number is a palindrome if it reads the same forwards and backwards. Decide whether N is a palindrome.",
      "One line with an integer N (0 <= N <= 10^18).",
      "Print YES if N is a palindrome and NO otherwise.",
      "12321")
def _(s):
    n = s.strip()
    return "YES" if n == n[::-1] else "NO"


@task("leap-year", "Leap Year",
      "In the Gregorian calendar a year is a leap year if it is divisible by 4, except years divisible by 100, which are leap years only if they are also divisible by 400. Decide whether year Y is a leap year.",
      "One line with an integer Y (1 <= Y <= 10^9).",
      "Print LEAP or COMMON.",
      "1900")
def _(s):
    y = int(s)
    return "LEAP" if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else "COMMON"


@task("triangle-type", "Kind of Triangle",
      "Given three side lengths, decide whether they form a triangle with positive area and, if so, whether it is equilateral, isosceles or scalene.",
      "One line with three integers a, b, c (1 <= a, b, c <= 10^9).",
      "Print EQUILATERAL, ISOSCELES, SCALENE, or IMPOSSIBLE if no triangle with positive area has these sides.",
      "5 5 8")
def _(s):
    a, b, c = sorted(ints(s))
    if a + b <= c:
        return "IMPOSSIBLE"
    if a == c:
        return "EQUILATERAL"
    if a == b or b == c:
        return "ISOSCELES"
    return "SCALENE"


@task("right-triangle", "Right Triangle",
      "Decide whether three integer side lengths, given in any order, form a right triangle.",
      "One line with three integers (1 <= each <= 10^9).",
      "Print YES if the sides form a right triangle and NO otherwise.",
      "13 5 12")
def _(s):
    a, b, c = sorted(ints(s))
    return "YES" if a * a + b * b == c * c else "NO"


@task("gcd-lcm", "GCD and LCM",
      "Print the greatest common divisor and the least common multiple of two positive integers.",
      "One line with two integers a and b (1 <= a, b <= 10^12).",
      "Print the GCD and the LCM separated by a space.",
      "84 120")
def _(s):
    a, b = ints(s)
    g = math.gcd(a, b)
    return f"{g} {a // g * b}"


@task("gcd-of-list", "Common Divisor of a List",
      "Find the largest integer that divides every number in a list.",
      "The first line holds N (1 <= N <= 10^5). The second line holds N positive integers, each at most 10^9.",
      "Print the greatest common divisor of all N numbers.",
      "4\n36 60 84 108")
def _(s):
    v = ints(s)[1:]
    return str(math.gcd(*v))


@task("prime-check", "Is It Prime?",
      "Decide whether a positive integer N is a prime number.",
      "One line with an integer N (1 <= N <= 10^12).",
      "Print PRIME or NOT PRIME.",
      "999983")
def _(s):
    n = int(s)
    if n < 2:
        return "NOT PRIME"
    i = 2
    while i * i <= n:
        if n % i == 0:
            return "NOT PRIME"
        i += 1
    return "PRIME"


@task("count-primes", "Counting Primes",
      "Count the prime numbers that are less than or equal to N.",
      "One line with an integer N (1 <= N <= 10^7).",
      "Print the number of primes p with p <= N.",
      "100")
def _(s):
    n = int(s)
    if n < 2:
        return "0"
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(sieve[i * i::i]))
    return str(sum(sieve))


@task("prime-factors", "Prime Factorization",
      "Write N as a product of primes in non-decreasing order.",
      "One line with an integer N (2 <= N <= 10^12).",
      "Print the prime factors of N in non-decreasing order, separated by spaces, each repeated as often as it divides N.",
      "360")
def _(s):
    n = int(s)
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return join(out)


@task("divisor-count", "Number of Divisors",
      "Count the positive divisors of N.",
      "One line with an integer N (1 <= N <= 10^12).",
      "Print the number of positive integers that divide N.",
      "720")
def _(s):
    n = int(s)
    count, d = 0, 1
    while d * d <= n:
        if n % d == 0:
            count += 1 if d * d == n else 2
        d += 1
    return str(count)


@task("perfect-number", "Perfect, Abundant or Deficient",
      "A positive integer is perfect if it equals the sum of its proper divisors (divisors smaller than itself), abundant if that sum is larger, and deficient if it is smaller. Classify N.",
      "One line with an integer N (1 <= N <= 10^10).",
      "Print PERFECT, ABUNDANT or DEFICIENT.",
      "28")
def _(s):
    n = int(s)
    total, d = 0, 1
    while d * d <= n:
        if n % d == 0:
            total += d
            if d * d != n:
                total += n // d
        d += 1
    total -= n
    return "PERFECT" if total == n else "ABUNDANT" if total > n else "DEFICIENT"


@task("armstrong-number", "Armstrong Number",
      "A number with k digits is an Armstrong number if the sum of its digits each raised to the power k equals the number itself (for example 153 = 1^3 + 5^3 + 3^3). Decide whether N is an Armstrong number.",
      "One line with an integer N (1 <= N <= 10^18).",
      "Print YES or NO.",
      "9474")
def _(s):
    d = s.strip()
    return "YES" if sum(int(c) ** len(d) for c in d) == int(d) else "NO"


@task("factorial-mod", "Large Factorial",
      "Compute N! modulo 1000000007.",
      "One line with an integer N (0 <= N <= 10^6).",
      "Print N! mod 1000000007.",
      "20")
def _(s):
    r = 1
    for i in range(2, int(s) + 1):
        r = r * i % 1_000_000_007
    return str(r)


@task("trailing-zeros", "Zeros at the End of a Factorial",
      "How many zeros does the decimal representation of N! end with?",
      "One line with an integer N (0 <= N <= 10^18).",
      "Print the number of trailing zeros of N!.",
      "1000")
def _(s):
    n, z = int(s), 0
    while n:
        n //= 5
        z += n
    return str(z)


@task("power-mod", "Modular Power",
      "Compute a raised to the power b, modulo m.",
      "One line with three integers a, b, m (0 <= a, b <= 10^18, 1 <= m <= 10^9).",
      "Print a^b mod m.",
      "3 200 1000")
def _(s):
    a, b, m = ints(s)
    return str(pow(a, b, m))


@task("fibonacci-mod", "Fibonacci Number",
      "The Fibonacci numbers are F(0) = 0, F(1) = 1 and F(n) = F(n-1) + F(n-2). Compute F(N) modulo 1000000007.",
      "One line with an integer N (0 <= N <= 10^18).",
      "Print F(N) mod 1000000007.",
      "90")
def _(s):
    mod = 1_000_000_007

    def fib(n):
        if n == 0:
            return 0, 1
        a, b = fib(n // 2)
        c = a * (2 * b - a) % mod
        d = (a * a + b * b) % mod
        return (d, (c + d) % mod) if n % 2 else (c, d)

    return str(fib(int(s))[0])


@task("collatz-steps", "Collatz Steps",
      "Starting from N, repeatedly replace the number by n/2 if it is even and by 3n+1 if it is odd. Count the steps needed to reach 1.",
      "One line with an integer N (1 <= N <= 10^12).",
      "Print the number of steps (0 if N is 1).",
      "27")
def _(s):
    n, steps = int(s), 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return str(steps)


@task("to-binary", "Binary Representation",
      "Print the binary representation of a non-negative integer.",
      "One line with an integer N (0 <= N <= 10^18).",
      "Print N in base 2 without leading zeros (print 0 for N = 0).",
      "1000")
def _(s):
    return format(int(s), "b")


@task("base-conversion", "Change of Base",
      "Convert a number written in base A to base B. Digits above 9 are written with the capital letters A to Z.",
      "The first line holds A and B (2 <= A, B <= 36). The second line holds the number in base A, without leading zeros, at most 60 digits.",
      "Print the same number in base B without leading zeros.",
      "16 2\nFF")
def _(s):
    first, number = rows(s)
    a, b = ints(first)
    n = int(number, a)
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = ""
    while n:
        out = digits[n % b] + out
        n //= b
    return out or "0"


@task("roman-to-int", "Reading Roman Numerals",
      "Convert a Roman numeral written with the letters I, V, X, L, C, D and M, using the usual subtractive forms (IV, IX, XL, XC, CD, CM), to an integer.",
      "One line with a valid Roman numeral for a value between 1 and 3999.",
      "Print its value.",
      "MCMXCIV")
def _(s):
    val = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    r = s.strip()
    total = 0
    for i, ch in enumerate(r):
        v = val[ch]
        total += -v if i + 1 < len(r) and val[r[i + 1]] > v else v
    return str(total)


@task("int-to-roman", "Writing Roman Numerals",
      "Write an integer as a Roman numeral, using the subtractive forms IV, IX, XL, XC, CD and CM.",
      "One line with an integer N (1 <= N <= 3999).",
      "Print N as a Roman numeral.",
      "2024")
def _(s):
    n = int(s)
    out = ""
    for v, sym in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
                   (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= v:
            out += sym
            n -= v
    return out


@task("clock-angle", "Angle Between the Hands",
      "At time H:M on an analog clock, find the smaller angle between the hour hand and the minute hand. The hour hand moves continuously.",
      "One line with the time in the form HH:MM (00 <= HH <= 23, 00 <= MM <= 59).",
      "Print the angle in degrees with exactly one digit after the decimal point.",
      "03:30")
def _(s):
    h, m = map(int, s.strip().split(":"))
    angle = abs(30 * (h % 12) + 0.5 * m - 6 * m)
    return f"{min(angle, 360 - angle):.1f}"


@task("add-minutes", "Later the Same Day",
      "A clock shows the time HH:MM in 24-hour format. What will it show after K more minutes?",
      "The first line holds the time HH:MM. The second line holds K (0 <= K <= 10^9).",
      "Print the new time in the form HH:MM.",
      "23:15\n130")
def _(s):
    t, k = rows(s)
    h, m = map(int, t.split(":"))
    total = (h * 60 + m + int(k)) % 1440
    return f"{total // 60:02d}:{total % 60:02d}"


@task("seconds-to-hms", "Formatting a Duration",
      "Convert a number of seconds to hours, minutes and seconds.",
      "One line with an integer S (0 <= S <= 10^9).",
      "Print H:MM:SS, where H has no leading zeros and MM and SS have exactly two digits.",
      "3725")
def _(s):
    n = int(s)
    return f"{n // 3600}:{n % 3600 // 60:02d}:{n % 60:02d}"


@task("twelve-to-24", "Military Time",
      "Convert a time from 12-hour format with AM or PM to 24-hour format. 12:00 AM is midnight and 12:00 PM is noon.",
      "One line in the form hh:mm AM or hh:mm PM (01 <= hh <= 12).",
      "Print the time as HH:MM in 24-hour format.",
      "07:05 PM")
def _(s):
    t, ap = s.split()
    h, m = map(int, t.split(":"))
    h = h % 12 + (12 if ap == "PM" else 0)
    return f"{h:02d}:{m:02d}"


@task("day-of-year", "Day of the Year",
      "Given a date in the Gregorian calendar, print which day of its year it is (January 1 is day 1).",
      "One line with a date in the form YYYY-MM-DD (1 <= YYYY <= 9999).",
      "Print the day of the year.",
      "2024-03-01")
def _(s):
    y, m, d = map(int, s.strip().split("-"))
    days = [31, 29 if y % 4 == 0 and (y % 100 or y % 400 == 0) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return str(sum(days[:m - 1]) + d)


@task("celsius-fahrenheit", "Temperature Table",
      "Print a conversion table from Celsius to Fahrenheit for the temperatures A, A+S, A+2S, ... up to and including B (if reached). F = C * 9 / 5 + 32.",
      "One line with three integers A, B and S (-1000 <= A <= B <= 1000, 1 <= S <= 1000).",
      "For each temperature print a line with C and F separated by a space, F rounded to one digit after the decimal point.",
      "-10 20 10")
def _(s):
    a, b, st = ints(s)
    return "\n".join(f"{c} {c * 9 / 5 + 32:.1f}" for c in range(a, b + 1, st))


@task("electricity-bill", "Electricity Bill",
      "An electricity company charges 3 coins for each of the first 100 units used in a month, 5 coins for each of the next 200 units, and 8 coins for every unit above 300. Compute the bill for U units.",
      "One line with an integer U (0 <= U <= 10^9).",
      "Print the bill in coins.",
      "420")
def _(s):
    u = int(s)
    return str(3 * min(u, 100) + 5 * max(0, min(u, 300) - 100) + 8 * max(0, u - 300))


@task("coin-change-greedy", "Fewest Coins",
      "A cashier pays change using coins of 1, 2, 5, 10, 20, 50, 100 and 200 cents. With these denominations, always taking the largest coin that fits uses the fewest coins. How many coins are needed for C cents?",
      "One line with an integer C (0 <= C <= 10^9).",
      "Print the minimum number of coins.",
      "389")
def _(s):
    c, n = int(s), 0
    for coin in (200, 100, 50, 20, 10, 5, 2, 1):
        n += c // coin
        c %= coin
    return str(n)


@task("sum-of-multiples", "Multiples of 3 or 5",
      "Find the sum of all positive integers below N that are multiples of 3 or 5.",
      "One line with an integer N (1 <= N <= 10^18).",
      "Print the sum.",
      "1000")
def _(s):
    n = int(s) - 1

    def tri(k):
        m = n // k
        return k * m * (m + 1) // 2

    return str(tri(3) + tri(5) - tri(15))


@task("count-multiples-range", "Multiples in a Range",
      "Count the integers x with A <= x <= B that are divisible by K.",
      "One line with three integers A, B, K (-10^18 <= A <= B <= 10^18, 1 <= K <= 10^18).",
      "Print the count.",
      "-10 25 7")
def _(s):
    a, b, k = ints(s)
    return str(b // k - (a - 1) // k)


@task("sum-of-squares-diff", "Square of Sum Minus Sum of Squares",
      "For the numbers 1 to N, compute (1 + 2 + ... + N)^2 - (1^2 + 2^2 + ... + N^2).",
      "One line with an integer N (1 <= N <= 10^6).",
      "Print the difference.",
      "10")
def _(s):
    n = int(s)
    return str((n * (n + 1) // 2) ** 2 - n * (n + 1) * (2 * n + 1) // 6)


@task("integer-sqrt", "Integer Square Root",
      "Print the largest integer r such that r * r <= N.",
      "One line with an integer N (0 <= N <= 10^36).",
      "Print r.",
      "1000000000000000000000")
def _(s):
    return str(math.isqrt(int(s)))


@task("quadratic-roots", "Real Roots",
      "How many distinct real roots does the equation a*x^2 + b*x + c = 0 have? If a is 0 the equation is linear; if it then has infinitely many solutions, say so.",
      "One line with three integers a, b, c (-10^9 <= a, b, c <= 10^9).",
      "Print 0, 1 or 2, or INFINITE.",
      "1 -3 2")
def _(s):
    a, b, c = ints(s)
    if a == 0:
        if b != 0:
            return "1"
        return "INFINITE" if c == 0 else "0"
    d = b * b - 4 * a * c
    return "2" if d > 0 else "1" if d == 0 else "0"


@task("happy-number", "Happy Number",
      "Replace a number by the sum of the squares of its digits, again and again. If this reaches 1 the starting number is happy; otherwise it loops forever. Decide whether N is happy.",
      "One line with an integer N (1 <= N <= 10^18).",
      "Print HAPPY or UNHAPPY.",
      "19")
def _(s):
    n, seen = int(s), set()
    while n != 1 and n not in seen:
        seen.add(n)
        n = sum(int(c) ** 2 for c in str(n))
    return "HAPPY" if n == 1 else "UNHAPPY"


@task("lucky-tickets", "Lucky Ticket",
      "A bus ticket has a number with an even count of digits. It is lucky if the sum of the digits in its first half equals the sum of the digits in its second half. Decide whether a ticket is lucky.",
      "One line with the ticket number: an even number of digits (2 to 100), possibly with leading zeros.",
      "Print LUCKY or ORDINARY.",
      "034601")
def _(s):
    t = s.strip()
    h = len(t) // 2
    return "LUCKY" if sum(map(int, t[:h])) == sum(map(int, t[h:])) else "ORDINARY"


@task("next-palindrome", "Next Palindromic Number",
      "Find the smallest palindromic number strictly greater than N.",
      "One line with an integer N (0 <= N <= 10^6).",
      "Print the smallest palindrome greater than N.",
      "808")
def _(s):
    n = int(s) + 1
    while str(n) != str(n)[::-1]:
        n += 1
    return str(n)


@task("sum-between", "Sum of a Range",
      "Compute the sum of all integers from A to B inclusive. A may be larger than B; the range is then from B to A.",
      "One line with two integers A and B (-10^9 <= A, B <= 10^9).",
      "Print the sum.",
      "7 -3")
def _(s):
    a, b = sorted(ints(s))
    return str((a + b) * (b - a + 1) // 2)


@task("average-grade", "Class Average",
      "Compute the average of N exam scores, rounded down to an integer, and count the scores that are strictly above that rounded average.",
      "The first line holds N (1 <= N <= 10^5). The second line holds N integers between 0 and 100.",
      "Print the rounded-down average and the count, separated by a space.",
      "6\n70 85 90 55 100 64")
def _(s):
    v = ints(s)[1:]
    avg = sum(v) // len(v)
    return f"{avg} {sum(1 for x in v if x > avg)}"


@task("rectangle-overlap", "Overlapping Rectangles",
      "Two axis-aligned rectangles are given by their lower-left and upper-right corners. Compute the area of their intersection (0 if they do not overlap).",
      "Two lines, each with four integers x1 y1 x2 y2 (x1 < x2, y1 < y2, all between -10^9 and 10^9).",
      "Print the area of the intersection.",
      "0 0 5 4\n3 2 9 7")
def _(s):
    a, b = (ints(r) for r in rows(s))
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return str(max(0, w) * max(0, h))


@task("point-in-circle", "Darts",
      "A dart board is a circle of radius R centred at the origin. For each dart, decide whether it landed on the board (points on the edge count).",
      "The first line holds R and N (1 <= R <= 10^4, 1 <= N <= 10^5). Each of the next N lines holds the integer coordinates x y of a dart (|x|, |y| <= 10^4).",
      "Print the number of darts on the board.",
      "5 4\n3 4\n0 0\n4 4\n-5 0")
def _(s):
    v = ints(s)
    r, n = v[0], v[1]
    pts = v[2:]
    return str(sum(1 for i in range(n) if pts[2 * i] ** 2 + pts[2 * i + 1] ** 2 <= r * r))


@task("manhattan-taxi", "Taxi Distance",
      "In a city laid out as a grid, a taxi drives from (x1, y1) to (x2, y2) along streets. It charges a base fare B plus C per block driven. What is the fare?",
      "One line with six integers x1 y1 x2 y2 B C (coordinates between -10^9 and 10^9, 0 <= B, C <= 1000).",
      "Print the fare.",
      "1 2 4 -2 5 3")
def _(s):
    x1, y1, x2, y2, b, c = ints(s)
    return str(b + c * (abs(x1 - x2) + abs(y1 - y2)))


@task("speeding-fine", "Speeding Fine",
      "On a road with speed limit L, a driver going at speed V pays no fine if V <= L, 100 if V exceeds L by at most 20, 270 if by at most 40, and 500 otherwise.",
      "One line with two integers L and V (1 <= L, V <= 500).",
      "Print the fine.",
      "90 117")
def _(s):
    lim, v = ints(s)
    over = v - lim
    return "0" if over <= 0 else "100" if over <= 20 else "270" if over <= 40 else "500"


@task("compound-interest", "Savings Account",
      "A bank pays P percent interest once a year on the whole balance, and the interest is rounded down to a whole coin. Starting with M coins, how many years does it take until the balance is at least T?",
      "One line with three integers M, P, T (1 <= M <= T <= 10^12, 1 <= P <= 100).",
      "Print the number of years.",
      "100 10 200")
def _(s):
    m, p, t = ints(s)
    years = 0
    while m < t:
        m += m * p // 100
        years += 1
    return str(years)


@task("sock-pairs", "Pairs of Socks",
      "A drawer holds N socks, each with a colour number. How many matching pairs can be formed?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N colour numbers (1 <= colour <= 10^9).",
      "Print the number of pairs.",
      "9\n10 20 20 10 10 30 50 10 20")
def _(s):
    v = ints(s)[1:]
    return str(sum(c // 2 for c in Counter(v).values()))


@task("chocolate-wrappers", "Chocolate Wrappers",
      "A shop sells chocolate bars for C coins each and gives one free bar for every W wrappers returned. With N coins, how many bars can you eat in total?",
      "One line with three integers N, C, W (1 <= N, C <= 10^9, 2 <= W <= 10^9).",
      "Print the total number of bars eaten.",
      "15 3 2")
def _(s):
    n, c, w = ints(s)
    bars = wrappers = n // c
    while wrappers >= w:
        new = wrappers // w
        bars += new
        wrappers = wrappers % w + new
    return str(bars)


@task("staircase-drawing", "Draw a Staircase",
      "Draw a right-aligned staircase of height N using the characters '#' and spaces: line i (1-based) has N - i spaces followed by i '#' characters.",
      "One line with an integer N (1 <= N <= 100).",
      "Print the N lines of the staircase.",
      "4")
def _(s):
    n = int(s)
    return "\n".join(" " * (n - i) + "#" * i for i in range(1, n + 1))


@task("multiplication-table", "Multiplication Table",
      "Print the multiplication table of N from N x 1 to N x K.",
      "One line with two integers N and K (1 <= N <= 10^6, 1 <= K <= 100).",
      "Print K lines of the form 'N x i = P'.",
      "7 5")
def _(s):
    n, k = ints(s)
    return "\n".join(f"{n} x {i} = {n * i}" for i in range(1, k + 1))


@task("fizzbuzz", "FizzBuzz",
      "For each number from 1 to N print Fizz if it is divisible by 3, Buzz if it is divisible by 5, FizzBuzz if divisible by both, and the number itself otherwise.",
      "One line with an integer N (1 <= N <= 10^5).",
      "Print N lines.",
      "15")
def _(s):
    out = []
    for i in range(1, int(s) + 1):
        out.append("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Strings


@task("reverse-words", "Words Backwards",
      "Print the words of a sentence in reverse order.",
      "One line with words made of letters, separated by single spaces (at most 10^5 characters).",
      "Print the words in reverse order, separated by single spaces.",
      "the quick brown fox")
def _(s):
    return join(s.split()[::-1])


@task("string-palindrome", "Palindrome Sentence",
      "Ignoring case and every character that is not a letter or a digit, decide whether a line reads the same forwards and backwards.",
      "One line of at most 10^5 printable characters.",
      "Print YES or NO.",
      "A man, a plan, a canal: Panama")
def _(s):
    t = [c.lower() for c in s.strip("\n") if c.isalnum()]
    return "YES" if t == t[::-1] else "NO"


@task("anagram-check", "Anagrams",
      "Two words are anagrams if one can be rearranged into the other. Ignoring case, decide whether two words are anagrams.",
      "Two lines, each with one word of letters (at most 10^5 letters).",
      "Print YES or NO.",
      "Listen\nSilent")
def _(s):
    a, b = rows(s)
    return "YES" if sorted(a.lower()) == sorted(b.lower()) else "NO"


@task("count-vowels", "Counting Vowels",
      "Count the vowels (a, e, i, o, u, in either case) in a line of text.",
      "One line of at most 10^5 printable characters.",
      "Print the number of vowels.",
      "Programming In Python Is Fun")
def _(s):
    return str(sum(1 for c in s.lower() if c in "aeiou"))


@task("capitalize-words", "Title Case",
      "Make the first letter of every word upper case and all its other letters lower case.",
      "One line of words made of letters, separated by single spaces.",
      "Print the line in title case.",
      "hELLO wORLD from PYTHON")
def _(s):
    return join(w[:1].upper() + w[1:].lower() for w in s.split())


@task("caesar-cipher", "Caesar Cipher",
      "Encrypt a message by shifting every letter K places forward in the alphabet, wrapping around from Z to A. Case is kept and other characters are unchanged.",
      "The first line holds K (0 <= K <= 10^9). The second line holds the message (at most 10^5 characters).",
      "Print the encrypted message.",
      "3\nHello, World!")
def _(s):
    k, msg = s.split("\n", 1)
    k = int(k) % 26
    out = []
    for c in msg.rstrip("\n"):
        if "a" <= c <= "z":
            out.append(chr((ord(c) - 97 + k) % 26 + 97))
        elif "A" <= c <= "Z":
            out.append(chr((ord(c) - 65 + k) % 26 + 65))
        else:
            out.append(c)
    return "".join(out)


@task("run-length-encode", "Run-Length Encoding",
      "Compress a string by replacing each maximal run of equal characters with the character followed by the length of the run.",
      "One line of lower-case letters (1 to 10^5 characters).",
      "Print the encoded string.",
      "aaabccddddd")
def _(s):
    t = s.strip()
    out, i = [], 0
    while i < len(t):
        j = i
        while j < len(t) and t[j] == t[i]:
            j += 1
        out.append(f"{t[i]}{j - i}")
        i = j
    return "".join(out)


@task("run-length-decode", "Run-Length Decoding",
      "A string was encoded by writing each run of equal letters as the letter followed by the run length (for example a3b1). Decode it.",
      "One line with the encoded string; run lengths are between 1 and 1000, and the decoded string has at most 10^6 characters.",
      "Print the decoded string.",
      "x3y1z12")
def _(s):
    return "".join(ch * int(n) for ch, n in re.findall(r"([a-zA-Z])(\d+)", s))


@task("most-frequent-letter", "Most Frequent Letter",
      "Find the letter that occurs most often in a text, ignoring case. If several letters tie, choose the one that comes first in the alphabet.",
      "One line of at most 10^5 characters with at least one letter.",
      "Print the letter in lower case.",
      "Mississippi River")
def _(s):
    c = Counter(ch for ch in s.lower() if "a" <= ch <= "z")
    best = max(c.values())
    return min(ch for ch, n in c.items() if n == best)


@task("first-unique-char", "First Unique Character",
      "Find the first character in a string that occurs exactly once.",
      "One line of lower-case letters (1 to 10^5 characters).",
      "Print that character, or -1 if every character repeats.",
      "swiss")
def _(s):
    t = s.strip()
    c = Counter(t)
    return next((ch for ch in t if c[ch] == 1), "-1")


@task("remove-duplicate-chars", "Remove Repeated Characters",
      "Remove every character that already occurred earlier in the string, keeping the first occurrence of each.",
      "One line of lower-case letters (1 to 10^5 characters).",
      "Print the string with repetitions removed.",
      "programming")
def _(s):
    seen, out = set(), []
    for ch in s.strip():
        if ch not in seen:
            seen.add(ch)
            out.append(ch)
    return "".join(out)


@task("longest-word", "Longest Word",
      "Find the longest word in a sentence. If several words share the greatest length, print the first of them.",
      "One line of words made of letters, separated by single spaces.",
      "Print the longest word.",
      "I love solving tricky puzzles daily")
def _(s):
    words_ = s.split()
    return max(words_, key=len)


@task("word-count", "Counting Words",
      "Count the words in a text. A word is a maximal run of characters other than spaces and line breaks.",
      "Several lines of text (at most 10^5 characters in total).",
      "Print the number of words.",
      "The rain  in Spain\nstays mainly   in the plain.")
def _(s):
    return str(len(s.split()))


@task("acronym", "Acronym",
      "Build the acronym of a phrase: the first letter of each word, in upper case. Words are separated by spaces or hyphens.",
      "One line with a phrase of letters, spaces and hyphens.",
      "Print the acronym.",
      "Portable Network graphics and self-contained underwater breathing apparatus")
def _(s):
    return "".join(w[0].upper() for w in re.split(r"[\s-]+", s.strip()) if w)


@task("camel-to-snake", "camelCase to snake_case",
      "Convert an identifier from camelCase to snake_case: put an underscore before every upper-case letter and make all letters lower case.",
      "One line with an identifier of letters that starts with a lower-case letter.",
      "Print the snake_case identifier.",
      "parseHttpResponseCode")
def _(s):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), s.strip())


@task("snake-to-camel", "snake_case to camelCase",
      "Convert an identifier from snake_case to camelCase: remove the underscores and make the letter after each underscore upper case.",
      "One line with an identifier of lower-case letters and single underscores, not starting or ending with an underscore.",
      "Print the camelCase identifier.",
      "max_retry_count")
def _(s):
    parts = s.strip().split("_")
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


@task("pangram", "Pangram",
      "A pangram is a sentence that uses every letter of the English alphabet at least once, in either case. Decide whether a sentence is a pangram.",
      "One line of at most 10^5 characters.",
      "Print PANGRAM or NOT PANGRAM.",
      "The quick brown fox jumps over the lazy dog")
def _(s):
    return "PANGRAM" if set("abcdefghijklmnopqrstuvwxyz") <= set(s.lower()) else "NOT PANGRAM"


@task("missing-letters", "Missing Letters",
      "List the letters of the alphabet that do not occur in a text, ignoring case.",
      "One line of at most 10^5 characters.",
      "Print the missing letters in alphabetical order as one lower-case word, or NONE if no letter is missing.",
      "Hello world, this is a test")
def _(s):
    missing = "".join(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in s.lower())
    return missing or "NONE"


@task("isogram", "Isogram",
      "An isogram is a word in which no letter occurs more than once, ignoring case. Decide whether a word is an isogram.",
      "One line with a word of letters.",
      "Print YES or NO.",
      "Dermatoglyphics")
def _(s):
    w = s.strip().lower()
    return "YES" if len(set(w)) == len(w) else "NO"


@task("balanced-brackets", "Balanced Brackets",
      "Decide whether a string of brackets ()[]{} is balanced: every opening bracket is closed by the matching bracket in the right order.",
      "One line with a string of the characters ()[]{} (1 to 10^5 characters).",
      "Print YES or NO.",
      "{[()()]}[")
def _(s):
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in s.strip():
        if ch in "([{":
            stack.append(ch)
        elif not stack or stack.pop() != pairs[ch]:
            return "NO"
    return "NO" if stack else "YES"


@task("bracket-depth", "Nesting Depth",
      "Find the maximum nesting depth of the parentheses in a correctly parenthesised expression.",
      "One line with an expression of digits, operators and parentheses; the parentheses are balanced.",
      "Print the maximum depth (0 if there are no parentheses).",
      "(1+(2*3)+((8)/4))+1")
def _(s):
    depth = best = 0
    for ch in s:
        if ch == "(":
            depth += 1
            best = max(best, depth)
        elif ch == ")":
            depth -= 1
    return str(best)


@task("longest-common-prefix", "Common Prefix",
      "Find the longest string that is a prefix of every word in a list.",
      "The first line holds N (1 <= N <= 10^4). Each of the next N lines holds a word of lower-case letters.",
      "Print the longest common prefix, or NONE if it is empty.",
      "3\nflower\nflow\nflight")
def _(s):
    words_ = rows(s)[1:]
    prefix = words_[0]
    for w in words_[1:]:
        while not w.startswith(prefix):
            prefix = prefix[:-1]
    return prefix or "NONE"


@task("count-occurrences", "Pattern Occurrences",
      "Count how many times a pattern occurs in a text; occurrences may overlap.",
      "The first line holds the text, the second the pattern (lower-case letters, each at most 10^4 characters).",
      "Print the number of occurrences.",
      "abababa\naba")
def _(s):
    text, pat = rows(s)
    return str(sum(1 for i in range(len(text) - len(pat) + 1) if text[i:i + len(pat)] == pat))


@task("string-rotation", "Rotated String",
      "A rotation of a string moves some characters from its start to its end (for example 'cdeab' is a rotation of 'abcde'). Decide whether the second string is a rotation of the first.",
      "Two lines, each with a string of lower-case letters (at most 10^5 characters).",
      "Print YES or NO.",
      "waterbottle\nerbottlewat")
def _(s):
    a, b = rows(s)
    return "YES" if len(a) == len(b) and b in a + a else "NO"


@task("toggle-case", "Toggle Case",
      "Change every lower-case letter to upper case and every upper-case letter to lower case.",
      "One line of at most 10^5 printable characters.",
      "Print the converted line.",
      "Hello World 2024!")
def _(s):
    return s.rstrip("\n").swapcase()


@task("remove-vowels", "Disemvowel",
      "Remove all vowels (a, e, i, o, u in either case) from a line of text.",
      "One line of at most 10^5 printable characters.",
      "Print the line without vowels.",
      "This website is for losers LOL!")
def _(s):
    return "".join(c for c in s.rstrip("\n") if c.lower() not in "aeiou")


@task("pig-latin", "Pig Latin",
      "Translate each word to Pig Latin: if a word starts with a vowel, add 'way' to its end; otherwise move the consonants before its first vowel to the end and add 'ay'. A word without vowels just gets 'ay' added.",
      "One line of lower-case words separated by single spaces.",
      "Print the translated words separated by single spaces.",
      "string apple glove rhythm")
def _(s):
    out = []
    for w in s.split():
        i = next((k for k, c in enumerate(w) if c in "aeiou"), None)
        if i == 0:
            out.append(w + "way")
        elif i is None:
            out.append(w + "ay")
        else:
            out.append(w[i:] + w[:i] + "ay")
    return join(out)


MORSE = {"A": ".-", "B": "-...", "C": "-.-.", "D": "-..", "E": ".", "F": "..-.", "G": "--.", "H": "....",
         "I": "..", "J": ".---", "K": "-.-", "L": ".-..", "M": "--", "N": "-.", "O": "---", "P": ".--.",
         "Q": "--.-", "R": ".-.", "S": "...", "T": "-", "U": "..-", "V": "...-", "W": ".--", "X": "-..-",
         "Y": "-.--", "Z": "--.."}


@task("morse-encode", "Morse Code",
      "Encode a message in International Morse Code. Letters of a word are separated by one space and words by ' / '. The codes are: " + ", ".join(f"{k} {v}" for k, v in MORSE.items()) + ".",
      "One line of upper-case words separated by single spaces.",
      "Print the encoded message.",
      "SOS HELP")
def _(s):
    return " / ".join(" ".join(MORSE[c] for c in w) for w in s.split())


@task("morse-decode", "Reading Morse Code",
      "Decode a message in International Morse Code, where letters are separated by one space and words by ' / '. The codes are: " + ", ".join(f"{k} {v}" for k, v in MORSE.items()) + ".",
      "One line with the encoded message.",
      "Print the decoded message in upper case, words separated by single spaces.",
      ".... . .-.. .-.. --- / .-- --- .-. .-.. -..")
def _(s):
    rev = {v: k for k, v in MORSE.items()}
    return join("".join(rev[c] for c in w.split()) for w in s.strip().split(" / "))


@task("atbash", "Atbash Cipher",
      "The Atbash cipher replaces each letter by its mirror in the alphabet: a becomes z, b becomes y, and so on. Case is kept and other characters are unchanged. Encode a line.",
      "One line of at most 10^5 printable characters.",
      "Print the encoded line.",
      "Attack at Dawn!")
def _(s):
    out = []
    for c in s.rstrip("\n"):
        if "a" <= c <= "z":
            out.append(chr(219 - ord(c)))
        elif "A" <= c <= "Z":
            out.append(chr(155 - ord(c)))
        else:
            out.append(c)
    return "".join(out)


@task("hamming-distance", "Hamming Distance",
      "The Hamming distance between two strings of equal length is the number of positions at which they differ. Compute it.",
      "Two lines with strings of equal length (1 to 10^5 characters).",
      "Print the Hamming distance.",
      "GAGCCTACTAACGGGAT\nCATCGTAATGACGGCCT")
def _(s):
    a, b = rows(s)
    return str(sum(x != y for x, y in zip(a, b)))


@task("edit-distance", "Edit Distance",
      "Find the minimum number of single-character insertions, deletions and substitutions that turn one word into another.",
      "Two lines, each with a word of lower-case letters (at most 2000 letters).",
      "Print the edit distance.",
      "kitten\nsitting")
def _(s):
    a, b = rows(s)
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return str(prev[-1])


@task("longest-run", "Longest Run",
      "Find the length of the longest block of consecutive equal characters in a string, and the character that forms it (the first such block if several are equally long).",
      "One line of lower-case letters (1 to 10^5 characters).",
      "Print the character and the length separated by a space.",
      "aabbbbccdddde")
def _(s):
    t = s.strip()
    best_c, best, i = t[0], 0, 0
    while i < len(t):
        j = i
        while j < len(t) and t[j] == t[i]:
            j += 1
        if j - i > best:
            best_c, best = t[i], j - i
        i = j
    return f"{best_c} {best}"


@task("longest-palindromic-substring", "Longest Palindromic Substring",
      "Find the length of the longest contiguous substring that is a palindrome.",
      "One line of lower-case letters (1 to 3000 characters).",
      "Print the length.",
      "forgeeksskeegfor")
def _(s):
    t = s.strip()
    best = 1
    for c in range(len(t)):
        for lo, hi in ((c, c), (c, c + 1)):
            while lo >= 0 and hi < len(t) and t[lo] == t[hi]:
                lo -= 1
                hi += 1
            best = max(best, hi - lo - 1)
    return str(best)


@task("longest-unique-substring", "No Repeated Characters",
      "Find the length of the longest contiguous substring in which no character repeats.",
      "One line of lower-case letters (1 to 10^5 characters).",
      "Print the length.",
      "abcabcbb")
def _(s):
    last, start, best = {}, 0, 0
    for i, ch in enumerate(s.strip()):
        if last.get(ch, -1) >= start:
            start = last[ch] + 1
        last[ch] = i
        best = max(best, i - start + 1)
    return str(best)


@task("word-frequency", "Top Words",
      "Find the K most frequent words of a text, ignoring case. Words are maximal runs of letters. Sort by decreasing frequency, and alphabetically among equal frequencies.",
      "The first line holds K (1 <= K <= 100). The rest of the input is the text (at most 10^5 characters); it has at least K distinct words.",
      "Print K lines, each with a word in lower case and its count.",
      "3\nThe cat and the hat. The cat sat on the mat; a cat is a cat.")
def _(s):
    k, text = s.split("\n", 1)
    c = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text))
    top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:int(k)]
    return "\n".join(f"{w} {n}" for w, n in top)


@task("sort-by-frequency", "Characters by Frequency",
      "Rearrange the characters of a string so that more frequent characters come first; characters with the same frequency appear in alphabetical order, and all copies of a character are kept together.",
      "One line of lower-case letters (1 to 10^5 characters).",
      "Print the rearranged string.",
      "programming")
def _(s):
    c = Counter(s.strip())
    return "".join(ch * n for ch, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


@task("thousands-separator", "Thousands Separator",
      "Write an integer with commas between groups of three digits, counting from the right.",
      "One line with an integer N (-10^18 <= N <= 10^18).",
      "Print N with thousands separators.",
      "-1234567")
def _(s):
    return f"{int(s):,}"


@task("mask-card", "Masking a Card Number",
      "Hide all but the last four digits of a card number by replacing them with '#'. Spaces are removed first.",
      "One line with a card number: 4 to 30 digits, possibly with spaces between groups.",
      "Print the masked number without spaces.",
      "4556 3646 0793 5616")
def _(s):
    d = s.replace(" ", "").strip()
    return "#" * (len(d) - 4) + d[-4:]


@task("luhn-check", "Luhn Checksum",
      "The Luhn test validates card numbers: from the rightmost digit going left, double every second digit, subtract 9 from any result above 9, and add all digits; the number is valid if the total is divisible by 10. Test a number.",
      "One line with 2 to 30 digits.",
      "Print VALID or INVALID.",
      "79927398713")
def _(s):
    total = 0
    for i, ch in enumerate(reversed(s.strip())):
        d = int(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return "VALID" if total % 10 == 0 else "INVALID"


@task("isbn10", "ISBN-10",
      "An ISBN-10 has nine digits and a check character (a digit or X, meaning 10). It is valid if 10*d1 + 9*d2 + ... + 1*d10 is divisible by 11. Hyphens are ignored. Validate an ISBN-10.",
      "One line with the ISBN: digits, possibly hyphens, and possibly a final X.",
      "Print VALID or INVALID.",
      "0-306-40615-2")
def _(s):
    d = s.strip().replace("-", "")
    if len(d) != 10 or not d[:9].isdigit() or not (d[9].isdigit() or d[9] == "X"):
        return "INVALID"
    vals = [int(c) for c in d[:9]] + [10 if d[9] == "X" else int(d[9])]
    return "VALID" if sum((10 - i) * v for i, v in enumerate(vals)) % 11 == 0 else "INVALID"


@task("number-to-words", "Numbers in Words",
      "Write a number between 0 and 999 in English words, in lower case, with a hyphen in compounds from twenty-one to ninety-nine and 'hundred' for the hundreds (for example 342 is 'three hundred forty-two'; no 'and').",
      "One line with an integer N (0 <= N <= 999).",
      "Print N in words.",
      "342")
def _(s):
    ones = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    tens = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
    n = int(s)

    def below100(k):
        if k < 20:
            return ones[k]
        return tens[k // 10] + ("-" + ones[k % 10] if k % 10 else "")

    if n < 100:
        return below100(n)
    rest = n % 100
    return ones[n // 100] + " hundred" + (" " + below100(rest) if rest else "")


@task("password-strength", "Strong Password",
      "A password is strong if it has at least 8 characters and contains at least one lower-case letter, one upper-case letter, one digit and one character that is none of these. Check a list of passwords.",
      "The first line holds N (1 <= N <= 1000). Each of the next N lines holds a password without spaces.",
      "For each password print STRONG or WEAK.",
      "3\nPassw0rd!\nSh0rt!x\nalllowercase")
def _(s):
    out = []
    for p in rows(s)[1:]:
        ok = (len(p) >= 8 and any(c.islower() for c in p) and any(c.isupper() for c in p)
              and any(c.isdigit() for c in p) and any(not c.isalnum() for c in p))
        out.append("STRONG" if ok else "WEAK")
    return "\n".join(out)


@task("email-username", "User Names from E-mails",
      "For each e-mail address, print the part before the '@', in lower case. Print each user name once, in order of first appearance.",
      "The first line holds N (1 <= N <= 10^4). Each of the next N lines holds an e-mail address with exactly one '@'.",
      "Print the distinct user names, one per line.",
      "4\nAlice@example.com\nbob@example.org\nALICE@other.net\ncarol.smith@example.com")
def _(s):
    seen, out = set(), []
    for line in rows(s)[1:]:
        u = line.split("@")[0].lower()
        if u not in seen:
            seen.add(u)
            out.append(u)
    return "\n".join(out)


@task("middle-character", "Middle of a Word",
      "Print the middle character of a word if its length is odd, or the middle two characters if its length is even.",
      "One line with a word (1 to 1000 characters).",
      "Print the middle character or characters.",
      "testing")
def _(s):
    w = s.strip()
    m = len(w) // 2
    return w[m] if len(w) % 2 else w[m - 1:m + 1]


@task("count-sentences", "Counting Sentences",
      "Count the sentences in a text. A sentence ends with '.', '!' or '?'; a run of such characters (like '?!' or '...') ends only one sentence.",
      "Several lines of text (at most 10^5 characters).",
      "Print the number of sentences.",
      "Wait... Is it over?! Yes. It is over.")
def _(s):
    return str(len(re.findall(r"[.!?]+", s)))


@task("duplicate-words", "Repeated Words",
      "List the words that occur more than once in a sentence, ignoring case, in the order in which their second occurrence appears.",
      "One line of words made of letters, separated by single spaces.",
      "Print the repeated words in lower case separated by spaces, or NONE.",
      "It was the best of times it was the worst of times")
def _(s):
    seen, out = Counter(), []
    for w in s.lower().split():
        seen[w] += 1
        if seen[w] == 2:
            out.append(w)
    return join(out) if out else "NONE"


@task("anagram-groups", "Groups of Anagrams",
      "Group words that are anagrams of one another. How many groups are there, and how large is the largest?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N lower-case words.",
      "Print the number of groups and the size of the largest group.",
      "7\nlisten silent enlist google tinsel banana inlets")
def _(s):
    words_ = s.split()[1:]
    c = Counter("".join(sorted(w)) for w in words_)
    return f"{len(c)} {max(c.values())}"


@task("binary-string-add", "Adding Binary Numbers",
      "Add two numbers given in binary.",
      "Two lines, each with a binary number of at most 10^4 digits, without leading zeros (or just 0).",
      "Print the sum in binary.",
      "1011\n111")
def _(s):
    a, b = rows(s)
    return format(int(a, 2) + int(b, 2), "b")


@task("big-number-sum", "Adding Huge Numbers",
      "Add two non-negative integers that may have up to 10^5 digits.",
      "Two lines, each with a non-negative integer without leading zeros.",
      "Print their sum.",
      "99999999999999999999\n1")
def _(s):
    a, b = rows(s)
    # long addition, so the solution does not rely on big-integer conversion limits
    a, b = a[::-1], b[::-1]
    out, carry = [], 0
    for i in range(max(len(a), len(b))):
        d = carry + (int(a[i]) if i < len(a) else 0) + (int(b[i]) if i < len(b) else 0)
        out.append(str(d % 10))
        carry = d // 10
    if carry:
        out.append(str(carry))
    return "".join(reversed(out))


@task("vowel-consonant", "Vowels and Consonants",
      "Count the vowels and the consonants among the letters of a text (y counts as a consonant).",
      "One line of at most 10^5 printable characters.",
      "Print the number of vowels and the number of consonants.",
      "Rhythm and Blues, 1950s!")
def _(s):
    letters = [c for c in s.lower() if "a" <= c <= "z"]
    v = sum(1 for c in letters if c in "aeiou")
    return f"{v} {len(letters) - v}"


@task("alternating-string", "Alternating Characters",
      "Delete the fewest characters from a string of A and B so that no two adjacent characters are equal. How many deletions are needed?",
      "One line with a string of the letters A and B (1 to 10^5 characters).",
      "Print the number of deletions.",
      "AAABBBAABB")
def _(s):
    t = s.strip()
    return str(sum(1 for i in range(1, len(t)) if t[i] == t[i - 1]))


@task("keyboard-row", "One Keyboard Row",
      "On a QWERTY keyboard the letter rows are 'qwertyuiop', 'asdfghjkl' and 'zxcvbnm'. Print the words that can be typed using letters of one row only, ignoring case.",
      "The first line holds N (1 <= N <= 1000). The second line holds N words of letters.",
      "Print those words in input order separated by spaces, or NONE.",
      "5\nHello Alaska Dad Peace typewriter")
def _(s):
    rows_ = [set("qwertyuiop"), set("asdfghjkl"), set("zxcvbnm")]
    out = [w for w in s.split()[1:] if any(set(w.lower()) <= r for r in rows_)]
    return join(out) if out else "NONE"


@task("license-key", "Formatting a License Key",
      "Reformat a license key: remove its dashes, make letters upper case, and split it into groups of K characters separated by dashes, where only the first group may be shorter.",
      "The first line holds the key (letters, digits and dashes, at most 10^5 characters). The second line holds K (1 <= K <= 10^5).",
      "Print the reformatted key (an empty key prints nothing).",
      "2-5g-3-J\n2")
def _(s):
    key, k = rows(s)
    k = int(k)
    t = key.replace("-", "").upper()
    first = len(t) % k or k
    groups = [t[:first]] + [t[i:i + k] for i in range(first, len(t), k)]
    return "-".join(g for g in groups if g)


@task("string-compression-gain", "Is Compression Worth It?",
      "Run-length encoding writes each maximal run of a repeated character as the character followed by the run length (aaab becomes a3b1). Print the encoding if it is shorter than the original string, and the original string otherwise.",
      "One line of lower-case letters (1 to 10^5 characters).",
      "Print the shorter of the two strings (the original if they are equally long).",
      "aabcccccaaa")
def _(s):
    t = s.strip()
    enc, i = [], 0
    while i < len(t):
        j = i
        while j < len(t) and t[j] == t[i]:
            j += 1
        enc.append(f"{t[i]}{j - i}")
        i = j
    e = "".join(enc)
    return e if len(e) < len(t) else t


@task("vertical-words", "Words in Columns",
      "Write the words of a sentence vertically, one word per column, top-aligned. Shorter words are padded with spaces, but trailing spaces are removed from each output line.",
      "One line of words separated by single spaces (at most 100 words of at most 100 letters).",
      "Print the columns row by row.",
      "TO BE OR NOT")
def _(s):
    words_ = s.split()
    h = max(map(len, words_))
    return "\n".join("".join(w[i] if i < len(w) else " " for w in words_).rstrip() for i in range(h))


@task("common-characters", "Letters in Every Word",
      "Find the letters that occur in every word of a list, with multiplicity: a letter that occurs at least twice in every word is listed twice.",
      "The first line holds N (1 <= N <= 100). The second line holds N lower-case words.",
      "Print the common letters in alphabetical order as one string, or NONE.",
      "3\nbella label roller")
def _(s):
    words_ = s.split()[1:]
    c = Counter(words_[0])
    for w in words_[1:]:
        c &= Counter(w)
    out = "".join(ch * n for ch, n in sorted(c.items()))
    return out or "NONE"


@task("ransom-note", "Ransom Note",
      "Can a note be written by cutting letters out of a magazine? Each letter of the magazine can be used once; spaces in the note need no letters.",
      "The first line holds the note, the second the magazine text (lower-case letters and spaces, each at most 10^5 characters).",
      "Print YES or NO.",
      "meet at noon\nthe moon is at its best on a nice evening")
def _(s):
    note, mag = rows(s)
    need = Counter(note.replace(" ", ""))
    have = Counter(mag.replace(" ", ""))
    return "YES" if all(have[c] >= n for c, n in need.items()) else "NO"


# ---------------------------------------------------------------------------------------------
# Arrays and matrices


@task("max-min-difference", "Range of Values",
      "Print the difference between the largest and the smallest of N numbers.",
      "The first line holds N (1 <= N <= 10^5). The second line holds N integers between -10^9 and 10^9.",
      "Print the difference.",
      "5\n7 -2 15 3 9")
def _(s):
    v = ints(s)[1:]
    return str(max(v) - min(v))


@task("second-largest", "Runner-up Score",
      "Find the second largest distinct value in a list of scores.",
      "The first line holds N (2 <= N <= 10^5). The second line holds N integers.",
      "Print the second largest distinct value, or NONE if all values are equal.",
      "6\n2 3 6 6 5 1")
def _(s):
    v = sorted(set(ints(s)[1:]))
    return str(v[-2]) if len(v) > 1 else "NONE"


@task("count-distinct", "Distinct Values",
      "Count the distinct values in a list.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the number of distinct values.",
      "8\n4 1 4 2 2 9 1 4")
def _(s):
    return str(len(set(ints(s)[1:])))


@task("two-sum", "Pair with a Given Sum",
      "Find two different positions i < j in a list with a[i] + a[j] = T. If several pairs exist, print the one with the smallest j, and among those the smallest i.",
      "The first line holds N and T (2 <= N <= 10^5, |T| <= 10^9). The second line holds N integers.",
      "Print the 1-based positions i and j, or -1 if no pair exists.",
      "6 10\n3 8 4 1 6 2")
def _(s):
    v = ints(s)
    n, t, a = v[0], v[1], v[2:]
    first = {}
    for j, x in enumerate(a):
        if t - x in first:
            return f"{first[t - x] + 1} {j + 1}"
        first.setdefault(x, j)
    return "-1"


@task("count-pairs-sum", "Counting Pairs",
      "Count the pairs of positions i < j such that a[i] + a[j] equals K.",
      "The first line holds N and K (1 <= N <= 2*10^5, |K| <= 10^9). The second line holds N integers.",
      "Print the number of pairs.",
      "6 6\n1 5 7 -1 5 3")
def _(s):
    v = ints(s)
    k, a = v[1], v[2:]
    seen, total = Counter(), 0
    for x in a:
        total += seen[k - x]
        seen[x] += 1
    return str(total)


@task("sort-numbers", "Sorting",
      "Sort a list of integers in non-decreasing order.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the sorted list separated by spaces.",
      "7\n5 -3 9 0 5 2 -8")
def _(s):
    return join(sorted(ints(s)[1:]))


@task("median", "Median",
      "Print the median of N numbers: the middle value after sorting, or the mean of the two middle values if N is even.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the median with exactly one digit after the decimal point.",
      "6\n7 1 3 9 4 10")
def _(s):
    v = sorted(ints(s)[1:])
    n = len(v)
    m = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return f"{m:.1f}"


@task("mode", "Most Common Value",
      "Find the value that occurs most often in a list; on a tie, print the smallest such value.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the value.",
      "9\n4 2 2 7 4 9 7 7 2")
def _(s):
    c = Counter(ints(s)[1:])
    best = max(c.values())
    return str(min(x for x, n in c.items() if n == best))


@task("rotate-array", "Rotating a List",
      "Rotate a list K positions to the right: the last K elements move to the front.",
      "The first line holds N and K (1 <= N <= 10^5, 0 <= K <= 10^9). The second line holds N integers.",
      "Print the rotated list.",
      "7 3\n1 2 3 4 5 6 7")
def _(s):
    v = ints(s)
    n, k, a = v[0], v[1] % v[0], v[2:]
    return join(a[n - k:] + a[:n - k])


@task("range-sum-queries", "Range Sums",
      "Answer Q queries on a fixed list: each asks for the sum of the elements from position l to position r (1-based, inclusive).",
      "The first line holds N and Q (1 <= N, Q <= 2*10^5). The second line holds N integers. Each of the next Q lines holds l and r (1 <= l <= r <= N).",
      "Print one line per query with the sum.",
      "5 3\n3 -1 4 1 5\n1 3\n2 5\n4 4")
def _(s):
    v = ints(s)
    n, q = v[0], v[1]
    a = v[2:2 + n]
    pre = [0]
    for x in a:
        pre.append(pre[-1] + x)
    qs = v[2 + n:]
    return "\n".join(str(pre[qs[2 * i + 1]] - pre[qs[2 * i] - 1]) for i in range(q))


@task("leaders", "Leaders in a List",
      "An element is a leader if it is strictly greater than every element to its right; the last element is always a leader. Print all leaders.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the leaders in their original order.",
      "6\n16 17 4 3 5 2")
def _(s):
    a = ints(s)[1:]
    out, best = [], None
    for x in reversed(a):
        if best is None or x > best:
            out.append(x)
            best = x
    return join(reversed(out))


@task("stock-one-trade", "Best Time to Sell",
      "Given a stock's price on each of N days, choose one day to buy and a later day to sell to maximise profit. If no trade makes a profit, the profit is 0.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N prices (1 <= price <= 10^9).",
      "Print the maximum profit.",
      "6\n7 1 5 3 6 4")
def _(s):
    a = ints(s)[1:]
    low, best = a[0], 0
    for p in a[1:]:
        best = max(best, p - low)
        low = min(low, p)
    return str(best)


@task("stock-many-trades", "Trading Every Day",
      "Given a stock's price on each of N days, you may buy and sell as many times as you like, holding at most one share at a time. What is the maximum profit?",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N prices.",
      "Print the maximum profit.",
      "6\n7 1 5 3 6 4")
def _(s):
    a = ints(s)[1:]
    return str(sum(max(0, a[i] - a[i - 1]) for i in range(1, len(a))))


@task("missing-number", "The Missing Number",
      "A list holds every integer from 1 to N except one. Find the missing one.",
      "The first line holds N (2 <= N <= 10^6). The second line holds N - 1 distinct integers from 1 to N.",
      "Print the missing integer.",
      "8\n3 7 1 2 8 4 5")
def _(s):
    v = ints(s)
    n = v[0]
    return str(n * (n + 1) // 2 - sum(v[1:]))


@task("find-duplicate", "The Repeated Number",
      "A list of N + 1 integers holds each integer from 1 to N at least once, so exactly one value appears twice. Find it.",
      "The first line holds N (1 <= N <= 10^6). The second line holds N + 1 integers.",
      "Print the repeated value.",
      "5\n1 3 4 2 5 3")
def _(s):
    v = ints(s)
    n = v[0]
    return str(sum(v[1:]) - n * (n + 1) // 2)


@task("majority-element", "Majority Vote",
      "An element is a majority element if it occurs more than N/2 times in a list of N elements. Find it if it exists.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the majority element, or NONE.",
      "7\n2 2 1 1 1 2 2")
def _(s):
    a = ints(s)[1:]
    x, n = Counter(a).most_common(1)[0]
    return str(x) if n * 2 > len(a) else "NONE"


@task("move-zeros", "Zeros to the End",
      "Move all zeros of a list to its end while keeping the order of the other elements.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the rearranged list.",
      "8\n0 1 0 3 12 0 5 0")
def _(s):
    a = ints(s)[1:]
    nz = [x for x in a if x != 0]
    return join(nz + [0] * (len(a) - len(nz)))


@task("merge-sorted", "Merging Sorted Lists",
      "Merge two lists that are each sorted in non-decreasing order into one sorted list.",
      "The first line holds N and M. The second line holds N sorted integers and the third line M sorted integers (1 <= N, M <= 10^5).",
      "Print the merged list.",
      "4 5\n1 4 7 9\n2 3 7 10 11")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    a, b = v[2:2 + n], v[2 + n:2 + n + m]
    i = j = 0
    out = []
    while i < n and j < m:
        if a[i] <= b[j]:
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return join(out + a[i:] + b[j:])


@task("list-intersection", "Common Elements",
      "Print the distinct values that occur in both of two lists, in increasing order.",
      "The first line holds N and M. The second line holds N integers and the third line M integers (1 <= N, M <= 10^5).",
      "Print the common values in increasing order, or NONE.",
      "6 5\n1 2 2 5 8 9\n2 9 9 4 1")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    common = sorted(set(v[2:2 + n]) & set(v[2 + n:2 + n + m]))
    return join(common) if common else "NONE"


@task("longest-increasing-run", "Longest Rising Streak",
      "Find the length of the longest block of consecutive days on which the temperature rose strictly every day (a single day is a streak of length 1).",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the length of the longest strictly increasing contiguous block.",
      "9\n5 6 3 5 7 8 9 1 2")
def _(s):
    a = ints(s)[1:]
    best = cur = 1
    for i in range(1, len(a)):
        cur = cur + 1 if a[i] > a[i - 1] else 1
        best = max(best, cur)
    return str(best)


@task("longest-increasing-subsequence", "Longest Increasing Subsequence",
      "Find the length of the longest strictly increasing subsequence of a list (its elements need not be adjacent).",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the length.",
      "8\n10 9 2 5 3 7 101 18")
def _(s):
    import bisect

    tails = []
    for x in ints(s)[1:]:
        i = bisect.bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return str(len(tails))


@task("max-subarray", "Best Stretch",
      "Find the largest possible sum of a non-empty contiguous block of a list.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers between -10^9 and 10^9.",
      "Print the maximum sum.",
      "9\n-2 1 -3 4 -1 2 1 -5 4")
def _(s):
    a = ints(s)[1:]
    best = cur = a[0]
    for x in a[1:]:
        cur = max(x, cur + x)
        best = max(best, cur)
    return str(best)


@task("max-product-pair", "Largest Product",
      "Find the largest product of two elements at different positions of a list.",
      "The first line holds N (2 <= N <= 2*10^5). The second line holds N integers between -10^9 and 10^9.",
      "Print the largest product.",
      "5\n-10 -3 5 6 -2")
def _(s):
    a = sorted(ints(s)[1:])
    return str(max(a[0] * a[1], a[-1] * a[-2]))


@task("min-difference-pair", "Closest Pair of Values",
      "Find the smallest absolute difference between two elements at different positions of a list.",
      "The first line holds N (2 <= N <= 2*10^5). The second line holds N integers.",
      "Print the smallest difference.",
      "6\n30 5 20 9 41 18")
def _(s):
    a = sorted(ints(s)[1:])
    return str(min(a[i + 1] - a[i] for i in range(len(a) - 1)))


@task("count-inversions", "Counting Inversions",
      "An inversion is a pair of positions i < j with a[i] > a[j]. Count the inversions of a list.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the number of inversions.",
      "6\n3 1 2 5 4 0")
def _(s):
    a = ints(s)[1:]

    def sort(lo, hi):
        if hi - lo <= 1:
            return a[lo:hi], 0
        mid = (lo + hi) // 2
        left, x = sort(lo, mid)
        right, y = sort(mid, hi)
        merged, inv, i, j = [], x + y, 0, 0
        while i < len(left) and j < len(right):
            if left[i] <= right[j]:
                merged.append(left[i])
                i += 1
            else:
                merged.append(right[j])
                inv += len(left) - i
                j += 1
        return merged + left[i:] + right[j:], inv

    return str(sort(0, len(a))[1])


@task("equilibrium-index", "Balance Point",
      "Find the first position i (1-based) such that the sum of the elements before i equals the sum of the elements after i.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the position, or -1 if there is none.",
      "7\n-7 1 5 2 -4 3 0")
def _(s):
    a = ints(s)[1:]
    total, left = sum(a), 0
    for i, x in enumerate(a):
        if left == total - left - x:
            return str(i + 1)
        left += x
    return "-1"


@task("trapping-rain-water", "Trapped Rain Water",
      "Bars of width 1 with the given heights stand side by side. After heavy rain, how many units of water are trapped between them?",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N non-negative heights.",
      "Print the amount of trapped water.",
      "12\n0 1 0 2 1 0 1 3 2 1 2 1")
def _(s):
    h = ints(s)[1:]
    left = [0] * len(h)
    best = 0
    for i, x in enumerate(h):
        best = max(best, x)
        left[i] = best
    best = total = 0
    for i in range(len(h) - 1, -1, -1):
        best = max(best, h[i])
        total += min(left[i], best) - h[i]
    return str(total)


@task("container-water", "Largest Container",
      "Vertical lines stand at positions 1..N with the given heights. Two lines and the ground form a container. What is the largest amount of water a container can hold (the distance between the lines times the lower height)?",
      "The first line holds N (2 <= N <= 2*10^5). The second line holds N non-negative heights.",
      "Print the largest area.",
      "9\n1 8 6 2 5 4 8 3 7")
def _(s):
    h = ints(s)[1:]
    i, j, best = 0, len(h) - 1, 0
    while i < j:
        best = max(best, (j - i) * min(h[i], h[j]))
        if h[i] < h[j]:
            i += 1
        else:
            j -= 1
    return str(best)


@task("kth-smallest", "K-th Smallest",
      "Print the K-th smallest element of a list (counting repeated values separately).",
      "The first line holds N and K (1 <= K <= N <= 2*10^5). The second line holds N integers.",
      "Print the K-th smallest element.",
      "7 3\n7 10 4 3 20 15 4")
def _(s):
    v = ints(s)
    return str(sorted(v[2:])[v[1] - 1])


@task("count-peaks", "Mountain Peaks",
      "A peak is an element strictly greater than both of its neighbours; the first and last elements are never peaks. Count the peaks.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the number of peaks.",
      "10\n1 3 2 4 4 1 5 6 2 7")
def _(s):
    a = ints(s)[1:]
    return str(sum(1 for i in range(1, len(a) - 1) if a[i - 1] < a[i] > a[i + 1]))


@task("window-max-sum", "Best Week",
      "Given daily sales, find the largest total over K consecutive days.",
      "The first line holds N and K (1 <= K <= N <= 2*10^5). The second line holds N integers.",
      "Print the largest sum of K consecutive elements.",
      "8 3\n2 1 5 1 3 2 9 1")
def _(s):
    v = ints(s)
    k, a = v[1], v[2:]
    cur = best = sum(a[:k])
    for i in range(k, len(a)):
        cur += a[i] - a[i - k]
        best = max(best, cur)
    return str(best)


@task("zero-sum-subarray", "Zero-Sum Stretch",
      "Decide whether some non-empty contiguous block of a list sums to zero.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print YES or NO.",
      "6\n4 2 -3 1 6 8")
def _(s):
    seen, total = {0}, 0
    for x in ints(s)[1:]:
        total += x
        if total in seen:
            return "YES"
        seen.add(total)
    return "NO"


@task("subarray-sum-count", "Blocks with a Given Sum",
      "Count the non-empty contiguous blocks of a list whose sum is exactly K.",
      "The first line holds N and K (1 <= N <= 2*10^5, |K| <= 10^14). The second line holds N integers.",
      "Print the number of blocks.",
      "6 5\n1 4 0 5 -5 5")
def _(s):
    v = ints(s)
    k, a = v[1], v[2:]
    seen, total, count = Counter({0: 1}), 0, 0
    for x in a:
        total += x
        count += seen[total - k]
        seen[total] += 1
    return str(count)


@task("dutch-flag", "Sorting Three Colours",
      "A list holds only the values 0, 1 and 2. Print how many of each there are and the list sorted.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N values, each 0, 1 or 2.",
      "Print the three counts on the first line and the sorted list on the second.",
      "9\n2 0 1 2 1 0 0 2 1")
def _(s):
    a = ints(s)[1:]
    c = Counter(a)
    return f"{c[0]} {c[1]} {c[2]}\n" + join(sorted(a))


@task("running-max", "Record Highs",
      "For each day, print the highest temperature seen so far, and finally the number of days that set a new record (the first day counts).",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print the running maxima on one line and the number of record days on the next.",
      "7\n3 1 4 1 5 9 2")
def _(s):
    a = ints(s)[1:]
    out, best, records = [], None, 0
    for x in a:
        if best is None or x > best:
            best = x
            records += 1
        out.append(best)
    return join(out) + f"\n{records}"


@task("array-product-except-self", "Product of the Others",
      "For each position, print the product of all the other elements of the list.",
      "The first line holds N (2 <= N <= 1000). The second line holds N integers between -10 and 10.",
      "Print N products.",
      "5\n1 2 3 4 5")
def _(s):
    a = ints(s)[1:]
    out = []
    for i in range(len(a)):
        p = 1
        for j, x in enumerate(a):
            if j != i:
                p *= x
        out.append(p)
    return join(out)


@task("next-greater-element", "Next Greater Element",
      "For each element, find the first element to its right that is strictly greater, or -1 if there is none.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N integers.",
      "Print N values.",
      "7\n4 5 2 25 7 8 1")
def _(s):
    a = ints(s)[1:]
    out, stack = [-1] * len(a), []
    for i, x in enumerate(a):
        while stack and a[stack[-1]] < x:
            out[stack.pop()] = x
        stack.append(i)
    return join(out)


@task("daily-temperatures", "Waiting for Warmth",
      "For each day, how many days must you wait for a strictly warmer day? Print 0 if no warmer day follows.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N temperatures.",
      "Print N values.",
      "8\n73 74 75 71 69 72 76 73")
def _(s):
    a = ints(s)[1:]
    out, stack = [0] * len(a), []
    for i, x in enumerate(a):
        while stack and a[stack[-1]] < x:
            j = stack.pop()
            out[j] = i - j
        stack.append(i)
    return join(out)


@task("histogram-rectangle", "Largest Rectangle in a Histogram",
      "Bars of width 1 and the given heights stand side by side. Find the area of the largest rectangle that fits inside the bars.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N non-negative heights.",
      "Print the largest area.",
      "6\n2 1 5 6 2 3")
def _(s):
    h = ints(s)[1:] + [0]
    stack, best = [], 0
    for i, x in enumerate(h):
        start = i
        while stack and stack[-1][1] >= x:
            start, height = stack.pop()
            best = max(best, height * (i - start))
        stack.append((start, x))
    return str(best)


@task("matrix-transpose", "Transpose",
      "Print the transpose of an R x C matrix.",
      "The first line holds R and C (1 <= R, C <= 500). Each of the next R lines holds C integers.",
      "Print C lines with R integers each.",
      "2 3\n1 2 3\n4 5 6")
def _(s):
    m = [ints(r) for r in rows(s)[1:]]
    return "\n".join(join(col) for col in zip(*m))


@task("matrix-rotate", "Rotating an Image",
      "Rotate an N x N matrix 90 degrees clockwise.",
      "The first line holds N (1 <= N <= 500). Each of the next N lines holds N integers.",
      "Print the rotated matrix.",
      "3\n1 2 3\n4 5 6\n7 8 9")
def _(s):
    m = [ints(r) for r in rows(s)[1:]]
    return "\n".join(join(r) for r in zip(*m[::-1]))


@task("spiral-order", "Spiral Walk",
      "Print the elements of an R x C matrix in clockwise spiral order, starting at the top-left corner.",
      "The first line holds R and C (1 <= R, C <= 500). Each of the next R lines holds C integers.",
      "Print the elements in spiral order on one line.",
      "3 4\n1 2 3 4\n5 6 7 8\n9 10 11 12")
def _(s):
    m = [ints(r) for r in rows(s)[1:]]
    out = []
    while m:
        out += m.pop(0)
        m = [list(r) for r in zip(*m)][::-1]
    return join(out)


@task("diagonal-difference", "Diagonal Difference",
      "Print the absolute difference between the sums of the two diagonals of a square matrix.",
      "The first line holds N (1 <= N <= 1000). Each of the next N lines holds N integers.",
      "Print the absolute difference.",
      "3\n11 2 4\n4 5 6\n10 8 -12")
def _(s):
    m = [ints(r) for r in rows(s)[1:]]
    n = len(m)
    return str(abs(sum(m[i][i] for i in range(n)) - sum(m[i][n - 1 - i] for i in range(n))))


@task("matrix-multiply", "Matrix Product",
      "Multiply an N x M matrix A by an M x K matrix B.",
      "The first line holds N, M, K (1 <= N, M, K <= 100). The next N lines hold A, then M lines hold B.",
      "Print the N x K product.",
      "2 3 2\n1 2 3\n4 5 6\n7 8\n9 10\n11 12")
def _(s):
    lines = rows(s)
    n, m, k = ints(lines[0])
    a = [ints(r) for r in lines[1:1 + n]]
    b = [ints(r) for r in lines[1 + n:1 + n + m]]
    return "\n".join(join(sum(a[i][t] * b[t][j] for t in range(m)) for j in range(k)) for i in range(n))


@task("matrix-row-col-sums", "Totals Table",
      "For an R x C table of numbers, print each row followed by its total, then a final line with the column totals and the grand total.",
      "The first line holds R and C (1 <= R, C <= 500). Each of the next R lines holds C integers.",
      "Print R + 1 lines with C + 1 integers each.",
      "2 3\n1 2 3\n4 5 6")
def _(s):
    m = [ints(r) for r in rows(s)[1:]]
    out = [join(r + [sum(r)]) for r in m]
    cols = [sum(c) for c in zip(*m)]
    out.append(join(cols + [sum(cols)]))
    return "\n".join(out)


@task("saddle-point", "Saddle Points",
      "A cell of a matrix is a saddle point if its value is the largest in its row and the smallest in its column. List all saddle points.",
      "The first line holds R and C (1 <= R, C <= 500). Each of the next R lines holds C integers.",
      "Print the 1-based row and column of each saddle point, one per line, ordered by row then column, or NONE.",
      "3 3\n9 8 7\n5 3 2\n6 6 7")
def _(s):
    m = [ints(r) for r in rows(s)[1:]]
    out = []
    for i, r in enumerate(m):
        for j, x in enumerate(r):
            if x == max(r) and x == min(row[j] for row in m):
                out.append(f"{i + 1} {j + 1}")
    return "\n".join(out) if out else "NONE"


@task("magic-square", "Magic Square",
      "A square matrix is magic if all its rows, all its columns and both diagonals have the same sum. Decide whether a matrix is magic.",
      "The first line holds N (1 <= N <= 500). Each of the next N lines holds N integers.",
      "Print MAGIC or NOT MAGIC.",
      "3\n2 7 6\n9 5 1\n4 3 8")
def _(s):
    m = [ints(r) for r in rows(s)[1:]]
    n = len(m)
    target = sum(m[0])
    sums = [sum(r) for r in m] + [sum(c) for c in zip(*m)]
    sums += [sum(m[i][i] for i in range(n)), sum(m[i][n - 1 - i] for i in range(n))]
    return "MAGIC" if all(x == target for x in sums) else "NOT MAGIC"


@task("pascal-row", "Pascal's Triangle",
      "Print row N of Pascal's triangle (row 0 is '1').",
      "One line with an integer N (0 <= N <= 60).",
      "Print the N + 1 binomial coefficients of row N.",
      "6")
def _(s):
    n = int(s)
    return join(math.comb(n, k) for k in range(n + 1))


@task("sudoku-check", "Checking a Sudoku",
      "Decide whether a filled 9 x 9 grid is a valid Sudoku solution: every row, every column and each of the nine 3 x 3 boxes contains the digits 1 to 9 exactly once.",
      "Nine lines, each with nine digits separated by spaces.",
      "Print VALID or INVALID.",
      "5 3 4 6 7 8 9 1 2\n6 7 2 1 9 5 3 4 8\n1 9 8 3 4 2 5 6 7\n8 5 9 7 6 1 4 2 3\n4 2 6 8 5 3 7 9 1\n7 1 3 9 2 4 8 5 6\n9 6 1 5 3 7 2 8 4\n2 8 7 4 1 9 6 3 5\n3 4 5 2 8 6 1 7 9")
def _(s):
    g = [ints(r) for r in rows(s)]
    full = set(range(1, 10))
    groups = g + [list(c) for c in zip(*g)]
    groups += [[g[r][c] for r in range(br, br + 3) for c in range(bc, bc + 3)] for br in (0, 3, 6) for bc in (0, 3, 6)]
    return "VALID" if all(set(x) == full and len(x) == 9 for x in groups) else "INVALID"


@task("tic-tac-toe", "Tic-Tac-Toe Result",
      "Given a final tic-tac-toe board, decide who won. A player wins with three of their marks in a row, column or diagonal. The board is from a real game, so at most one player has a line.",
      "Three lines of three characters each: X, O or '.' for an empty cell.",
      "Print X, O, DRAW if the board is full with no winner, or ONGOING otherwise.",
      "XOX\nOXO\nOXX")
def _(s):
    b = rows(s)
    lines = b + ["".join(c) for c in zip(*b)] + [b[0][0] + b[1][1] + b[2][2], b[0][2] + b[1][1] + b[2][0]]
    for p in "XO":
        if p * 3 in lines:
            return p
    return "DRAW" if "." not in "".join(b) else "ONGOING"


@task("minesweeper-numbers", "Minesweeper Numbers",
      "In a Minesweeper grid, replace every empty cell '.' by the number of mines '*' among its up to eight neighbours. Mines stay '*'.",
      "The first line holds R and C (1 <= R, C <= 500). Each of the next R lines holds C characters '.' or '*'.",
      "Print the completed grid.",
      "3 4\n*...\n..*.\n....")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = lines[1:1 + r]
    out = []
    for i in range(r):
        row = ""
        for j in range(c):
            if g[i][j] == "*":
                row += "*"
            else:
                row += str(sum(1 for di in (-1, 0, 1) for dj in (-1, 0, 1)
                               if (di or dj) and 0 <= i + di < r and 0 <= j + dj < c and g[i + di][j + dj] == "*"))
        out.append(row)
    return "\n".join(out)


@task("game-of-life", "One Generation of Life",
      "In Conway's Game of Life, a live cell '#' with two or three live neighbours survives, a dead cell '.' with exactly three live neighbours becomes alive, and every other cell is dead in the next generation. Cells outside the grid are dead. Print the next generation.",
      "The first line holds R and C (1 <= R, C <= 500). Each of the next R lines holds C characters '#' or '.'.",
      "Print the next generation.",
      "5 5\n.....\n..#..\n..#..\n..#..\n.....")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = lines[1:1 + r]
    out = []
    for i in range(r):
        row = ""
        for j in range(c):
            n = sum(1 for di in (-1, 0, 1) for dj in (-1, 0, 1)
                    if (di or dj) and 0 <= i + di < r and 0 <= j + dj < c and g[i + di][j + dj] == "#")
            alive = g[i][j] == "#"
            row += "#" if (alive and n in (2, 3)) or (not alive and n == 3) else "."
        out.append(row)
    return "\n".join(out)


@task("count-islands", "Counting Islands",
      "A map shows land '#' and water '.'. Land cells that touch horizontally or vertically belong to the same island. Count the islands and give the size of the largest.",
      "The first line holds R and C (1 <= R, C <= 1000). Each of the next R lines holds C characters.",
      "Print the number of islands and the size of the largest (0 0 if there is no land).",
      "4 6\n##..#.\n#...##\n..#...\n.###..")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = [list(x) for x in lines[1:1 + r]]
    count = best = 0
    for i in range(r):
        for j in range(c):
            if g[i][j] == "#":
                count += 1
                size, stack = 0, [(i, j)]
                g[i][j] = "."
                while stack:
                    a, b = stack.pop()
                    size += 1
                    for da, db in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                        x, y = a + da, b + db
                        if 0 <= x < r and 0 <= y < c and g[x][y] == "#":
                            g[x][y] = "."
                            stack.append((x, y))
                best = max(best, size)
    return f"{count} {best}"


@task("grid-shortest-path", "Through the Maze",
      "A maze is a grid of open cells '.' and walls '#'. Moving one step up, down, left or right into an open cell takes one minute. How many minutes does it take to go from the top-left cell to the bottom-right cell?",
      "The first line holds R and C (1 <= R, C <= 1000). Each of the next R lines holds C characters; both corner cells are open.",
      "Print the minimum number of steps, or -1 if the exit cannot be reached.",
      "4 5\n..#..\n#...#\n..#..\n#....")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = lines[1:1 + r]
    dist = {(0, 0): 0}
    q = deque([(0, 0)])
    while q:
        a, b = q.popleft()
        if (a, b) == (r - 1, c - 1):
            return str(dist[(a, b)])
        for da, db in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            x, y = a + da, b + db
            if 0 <= x < r and 0 <= y < c and g[x][y] == "." and (x, y) not in dist:
                dist[(x, y)] = dist[(a, b)] + 1
                q.append((x, y))
    return "-1"


@task("knight-moves", "Knight's Journey",
      "On an N x N chessboard, find the minimum number of moves a knight needs to go from one square to another.",
      "The first line holds N (1 <= N <= 1000). The second line holds the start row and column, the third the target row and column (1-based).",
      "Print the minimum number of moves, or -1 if the target cannot be reached.",
      "8\n1 1\n8 8")
def _(s):
    v = ints(s)
    n, sr, sc, tr, tc = v
    dist = {(sr, sc): 0}
    q = deque([(sr, sc)])
    while q:
        a, b = q.popleft()
        if (a, b) == (tr, tc):
            return str(dist[(a, b)])
        for da, db in ((1, 2), (2, 1), (-1, 2), (-2, 1), (1, -2), (2, -1), (-1, -2), (-2, -1)):
            x, y = a + da, b + db
            if 1 <= x <= n and 1 <= y <= n and (x, y) not in dist:
                dist[(x, y)] = dist[(a, b)] + 1
                q.append((x, y))
    return "-1"


@task("flood-fill", "Paint Bucket",
      "An image is a grid of lower-case letters, one per colour. The paint bucket tool, applied at a cell, recolours that cell and every cell connected to it horizontally or vertically through cells of the same original colour. Apply it once.",
      "The first line holds R, C, the 1-based row and column of the click, and the new colour letter. Each of the next R lines holds C letters (1 <= R, C <= 1000).",
      "Print the recoloured image.",
      "4 5 2 2 x\naabba\nabbba\naabaa\nccbbb")
def _(s):
    lines = rows(s)
    parts = lines[0].split()
    r, c, sr, sc, new = int(parts[0]), int(parts[1]), int(parts[2]) - 1, int(parts[3]) - 1, parts[4]
    g = [list(x) for x in lines[1:1 + r]]
    old = g[sr][sc]
    if old != new:
        stack = [(sr, sc)]
        g[sr][sc] = new
        while stack:
            a, b = stack.pop()
            for da, db in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                x, y = a + da, b + db
                if 0 <= x < r and 0 <= y < c and g[x][y] == old:
                    g[x][y] = new
                    stack.append((x, y))
    return "\n".join("".join(row) for row in g)


# ---------------------------------------------------------------------------------------------
# Simulations and everyday problems


@task("robot-final-position", "Robot on a Grid",
      "A robot starts at (0, 0) facing north. It follows commands: L turns left 90 degrees, R turns right 90 degrees, and F moves one step forward. Where does it end and which way does it face?",
      "One line with a string of the letters L, R and F (1 to 10^5 characters).",
      "Print the final x and y coordinates and the direction (N, E, S or W). North is +y and east is +x.",
      "FFRFFLFRRF")
def _(s):
    dirs = "NESW"
    steps = {"N": (0, 1), "E": (1, 0), "S": (0, -1), "W": (-1, 0)}
    x = y = d = 0
    for ch in s.strip():
        if ch == "L":
            d = (d - 1) % 4
        elif ch == "R":
            d = (d + 1) % 4
        else:
            dx, dy = steps[dirs[d]]
            x, y = x + dx, y + dy
    return f"{x} {y} {dirs[d]}"


@task("robot-return", "Back Home",
      "A delivery robot moves one block per command: U (up), D (down), L (left) and R (right). Does it finish where it started, and how far (in blocks along the grid) from the start is it at the end?",
      "One line with a string of the letters U, D, L and R (1 to 10^5 characters).",
      "Print YES or NO, then the Manhattan distance from the start.",
      "UURDDLLL")
def _(s):
    t = s.strip()
    x = t.count("R") - t.count("L")
    y = t.count("U") - t.count("D")
    return f"{'YES' if x == 0 and y == 0 else 'NO'} {abs(x) + abs(y)}"


@task("elevator-trips", "Elevator Travel",
      "An elevator starts at floor 0 and visits the requested floors in the given order. Moving one floor takes 3 seconds, and each stop takes 10 seconds (a request for the floor the elevator is already on still takes a stop). How long does the whole sequence take?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N floor numbers (0 to 200).",
      "Print the total time in seconds.",
      "4\n5 2 2 8")
def _(s):
    v = ints(s)[1:]
    cur, total = 0, 0
    for f in v:
        total += 3 * abs(f - cur) + 10
        cur = f
    return str(total)


@task("bus-capacity", "Bus Route",
      "A bus with capacity C starts empty. At each stop, first the given number of passengers get off, then up to the given number get on as long as seats remain; those who cannot board wait for the next bus. How many passengers were left behind in total?",
      "The first line holds C and N (1 <= C <= 10^4, 1 <= N <= 10^5). Each of the next N lines holds the numbers getting off and wanting to get on (getting off never exceeds the passengers on board).",
      "Print the total number of passengers left behind.",
      "10 4\n0 8\n3 6\n5 4\n2 9")
def _(s):
    v = ints(s)
    cap, n = v[0], v[1]
    on, left = 0, 0
    for i in range(n):
        off, want = v[2 + 2 * i], v[3 + 2 * i]
        on -= off
        board = min(want, cap - on)
        on += board
        left += want - board
    return str(left)


@task("parking-fee", "Parking Garage",
      "A garage charges 2 coins for the first started hour and 1 coin for every further started hour, but never more than 10 coins for one day of 24 hours. A car pays 10 coins for each full day of its stay, plus the hourly rate (again at most 10 coins) for the minutes left over, if any. Compute the fee for a stay of M minutes.",
      "One line with an integer M (1 <= M <= 10^7).",
      "Print the fee in coins.",
      "1630")
def _(s):
    m = int(s)
    days, rest = divmod(m, 1440)
    fee = 10 * days
    if rest:
        hours = -(-rest // 60)
        fee += min(10, 2 + (hours - 1))
    return str(fee)


@task("bowling-score", "Ten-Pin Bowling",
      "Score a complete game of ten-pin bowling given the number of pins knocked down by each roll. A strike (10 pins on a frame's first roll) scores 10 plus the next two rolls; a spare (10 pins in a frame's two rolls) scores 10 plus the next roll; other frames score their pins. The tenth frame includes its bonus rolls.",
      "One line with the pins of every roll of the game, separated by spaces.",
      "Print the total score.",
      "10 7 3 9 0 10 0 8 8 2 0 6 10 10 10 8 1")
def _(s):
    r = ints(s)
    total, i = 0, 0
    for _frame in range(10):
        if r[i] == 10:
            total += 10 + r[i + 1] + r[i + 2]
            i += 1
        elif r[i] + r[i + 1] == 10:
            total += 10 + r[i + 2]
            i += 2
        else:
            total += r[i] + r[i + 1]
            i += 2
    return str(total)


@task("rock-paper-scissors", "Rock, Paper, Scissors",
      "Two players play N rounds of rock-paper-scissors (R, P, S). Rock beats scissors, scissors beat paper and paper beats rock. Count the rounds each player won and declare the overall winner.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds the two players' choices.",
      "Print the wins of player 1 and player 2, then PLAYER 1, PLAYER 2 or TIE.",
      "5\nR S\nP P\nS R\nP R\nS P")
def _(s):
    beats = {"R": "S", "S": "P", "P": "R"}
    a = b = 0
    for line in rows(s)[1:]:
        x, y = line.split()
        if beats[x] == y:
            a += 1
        elif beats[y] == x:
            b += 1
    verdict = "PLAYER 1" if a > b else "PLAYER 2" if b > a else "TIE"
    return f"{a} {b}\n{verdict}"


@task("card-war", "The Card Game War",
      "Two players each hold a deck. In each round both reveal their top card; the higher card wins and its owner puts both cards at the bottom of their deck, the winner's card first. If the cards are equal, each player puts their own card at the bottom of their own deck. The game ends when a deck is empty, or after 1000 rounds.",
      "The first line holds player 1's deck from top to bottom, the second line player 2's (1 to 26 cards each, values 2 to 14).",
      "Print the number of rounds played and the winner: 1, 2, or DRAW if both decks are non-empty after 1000 rounds.",
      "5 8 3 12\n7 4 9 2")
def _(s):
    a, b = (deque(ints(r)) for r in rows(s))
    rounds = 0
    while a and b and rounds < 1000:
        x, y = a.popleft(), b.popleft()
        if x > y:
            a.extend([x, y])
        elif y > x:
            b.extend([y, x])
        else:
            a.append(x)
            b.append(y)
        rounds += 1
    winner = "1" if not b else "2" if not a else "DRAW"
    return f"{rounds} {winner}"


@task("library-fine", "Library Fine",
      "A book is due on one date and returned on another (dates as day, month, year). The fine is 0 if it is returned on or before the due date, 15 coins per day late within the same month and year, 500 coins per month late within the same year, and 10000 coins if returned in a later year.",
      "The first line holds the return date and the second the due date, each as D M Y.",
      "Print the fine.",
      "9 6 2015\n6 6 2015")
def _(s):
    d1, m1, y1, d2, m2, y2 = ints(s)
    if (y1, m1, d1) <= (y2, m2, d2):
        return "0"
    if y1 > y2:
        return "10000"
    if m1 > m2:
        return str(500 * (m1 - m2))
    return str(15 * (d1 - d2))


@task("cinema-tickets", "Cinema Tickets",
      "A cinema charges 12 coins for adults, 8 for children under 12 and 9 for seniors aged 65 or more. A group of at least 10 people gets 10 percent off the total, rounded down to a whole coin. Compute the price for a group.",
      "The first line holds N (1 <= N <= 1000). The second line holds N ages (0 to 120).",
      "Print the total price.",
      "11\n34 36 8 10 67 70 12 45 5 40 41")
def _(s):
    ages = ints(s)[1:]
    total = sum(8 if a < 12 else 9 if a >= 65 else 12 for a in ages)
    if len(ages) >= 10:
        total -= total // 10
    return str(total)


@task("vending-machine", "Vending Machine Change",
      "A vending machine gives change using as few coins as possible from its stock of 1, 5, 10 and 25 cent coins. Given the stock of each coin and the change due, decide whether exact change can be given and with which coins, using the greedy rule of always taking the largest coin that still fits and is in stock.",
      "The first line holds the numbers of 25, 10, 5 and 1 cent coins in stock. The second line holds the change due C (0 <= C <= 10^6).",
      "Print the numbers of 25, 10, 5 and 1 cent coins given, or IMPOSSIBLE if the greedy rule cannot pay exactly.",
      "2 1 3 4\n77")
def _(s):
    v = ints(s)
    stock, c = v[:4], v[4]
    used = []
    for coin, have in zip((25, 10, 5, 1), stock):
        k = min(have, c // coin)
        used.append(k)
        c -= k * coin
    return join(used) if c == 0 else "IMPOSSIBLE"


@task("traffic-light", "Traffic Light",
      "A traffic light cycles green for G seconds, yellow for Y seconds and red for R seconds, starting green at time 0. What colour is it at time T?",
      "One line with four integers G, Y, R, T (1 <= G, Y, R <= 10^4, 0 <= T <= 10^18).",
      "Print GREEN, YELLOW or RED.",
      "30 5 25 1234")
def _(s):
    g, y, r, t = ints(s)
    t %= g + y + r
    return "GREEN" if t < g else "YELLOW" if t < g + y else "RED"


@task("bank-account", "Bank Statement",
      "Process a list of bank transactions on an account that starts at balance 0. A deposit always succeeds; a withdrawal that would make the balance negative is rejected. Report the final balance and the number of rejected withdrawals.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds DEPOSIT x or WITHDRAW x (1 <= x <= 10^9).",
      "Print the final balance and the number of rejected withdrawals.",
      "5\nDEPOSIT 100\nWITHDRAW 30\nWITHDRAW 80\nDEPOSIT 20\nWITHDRAW 90")
def _(s):
    bal = rej = 0
    for line in rows(s)[1:]:
        op, x = line.split()
        x = int(x)
        if op == "DEPOSIT":
            bal += x
        elif x > bal:
            rej += 1
        else:
            bal -= x
    return f"{bal} {rej}"


@task("inventory", "Warehouse Inventory",
      "A warehouse records shipments in (IN item quantity) and orders out (OUT item quantity). An order larger than the stock of that item is not filled at all. After all records, list every item that has a positive stock.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds IN or OUT, an item name (lower-case letters) and a quantity.",
      "Print each item with positive stock and its quantity, in alphabetical order, one per line, or EMPTY.",
      "6\nIN apple 10\nIN pear 4\nOUT apple 3\nOUT pear 5\nIN kiwi 2\nOUT kiwi 2")
def _(s):
    stock = Counter()
    for line in rows(s)[1:]:
        op, item, q = line.split()
        q = int(q)
        if op == "IN":
            stock[item] += q
        elif stock[item] >= q:
            stock[item] -= q
    out = [f"{k} {v}" for k, v in sorted(stock.items()) if v > 0]
    return "\n".join(out) if out else "EMPTY"


@task("letter-grades", "Letter Grades",
      "Convert percentage scores to letter grades: A for 90 and above, B for 80 to 89, C for 70 to 79, D for 60 to 69 and F below 60. Then print how many students got each grade.",
      "The first line holds N (1 <= N <= 10^5). The second line holds N scores from 0 to 100.",
      "Print the grades on one line, then the counts of A, B, C, D and F on the next.",
      "7\n95 82 67 45 78 90 59")
def _(s):
    g = ["A" if x >= 90 else "B" if x >= 80 else "C" if x >= 70 else "D" if x >= 60 else "F" for x in ints(s)[1:]]
    c = Counter(g)
    return join(g) + "\n" + join(c[k] for k in "ABCDF")


@task("attendance-streak", "Attendance Record",
      "A student's record is a string of P (present), A (absent) and L (late). The student is eligible for an award if there are fewer than two absences in total and never three or more consecutive lates. Also report the longest run of consecutive presents.",
      "One line with the record (1 to 10^5 characters).",
      "Print ELIGIBLE or NOT ELIGIBLE, then the longest run of P.",
      "PPALLPPPLLLP")
def _(s):
    t = s.strip()
    ok = t.count("A") < 2 and "LLL" not in t
    longest = max((len(x) for x in re.findall(r"P+", t)), default=0)
    return f"{'ELIGIBLE' if ok else 'NOT ELIGIBLE'} {longest}"


@task("step-goal", "Step Goal",
      "A fitness tracker records the steps of each day. Count the days on which the goal of G steps was reached and the longest streak of consecutive days reaching it.",
      "The first line holds N and G (1 <= N <= 10^5, 1 <= G <= 10^6). The second line holds N step counts.",
      "Print the number of successful days and the longest streak.",
      "8 10000\n12000 9500 10000 11000 15000 3000 10001 10002")
def _(s):
    v = ints(s)
    g, a = v[1], v[2:]
    days = streak = best = 0
    for x in a:
        if x >= g:
            days += 1
            streak += 1
            best = max(best, streak)
        else:
            streak = 0
    return f"{days} {best}"


@task("water-tank", "Water Tank",
      "A tank holding up to C litres starts with S litres. Each hour, a given amount of water flows in (or out, if negative). The tank overflows beyond C (the excess is lost) and cannot go below 0 (the missing water is simply not delivered). Print the level after each hour and the total litres lost to overflow.",
      "The first line holds C, S and N (0 <= S <= C <= 10^9, 1 <= N <= 10^5). The second line holds N integers.",
      "Print the N levels on one line and the total overflow on the next.",
      "100 40 5\n50 30 -90 -10 120")
def _(s):
    v = ints(s)
    cap, level, n = v[0], v[1], v[2]
    out, lost = [], 0
    for x in v[3:3 + n]:
        level += x
        if level > cap:
            lost += level - cap
            level = cap
        level = max(level, 0)
        out.append(level)
    return join(out) + f"\n{lost}"


@task("plant-watering", "Watering the Plants",
      "Plants stand in a row at positions 0 to N-1; plant i needs w[i] litres. A gardener with a can of capacity C starts at the river at position -1 with a full can. She waters the plants in order, and when the can holds too little for the next plant she walks back to the river to refill and returns. Each unit of distance is one step. How many steps does she take until the last plant is watered?",
      "The first line holds N and C (1 <= N <= 10^5, max(w) <= C <= 10^9). The second line holds the N needs.",
      "Print the number of steps.",
      "4 5\n2 2 3 3")
def _(s):
    v = ints(s)
    n, cap, w = v[0], v[1], v[2:]
    water, steps = cap, 0
    for i, need in enumerate(w):
        if water < need:
            steps += 2 * i
            water = cap
        steps += 1
        water -= need
    return str(steps)


@task("election-winner", "Election Night",
      "Count the votes of an election. Print each candidate's votes, most votes first and alphabetically on ties, then the winner, or TIE if the top candidates have equal votes.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds one vote: a candidate's name.",
      "Print one line per candidate with the name and the votes, then a line with the winner or TIE.",
      "7\nAda\nGrace\nAda\nLinus\nGrace\nAda\nLinus")
def _(s):
    c = Counter(rows(s)[1:])
    ordered = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
    top = ordered[0][1]
    winners = [k for k, v in ordered if v == top]
    return "\n".join(f"{k} {v}" for k, v in ordered) + "\n" + (winners[0] if len(winners) == 1 else "TIE")


@task("league-table", "League Table",
      "In a football league a win is worth 3 points, a draw 1 and a loss 0. Given the match results, print the table sorted by points, then goal difference, then goals scored (all descending), then team name.",
      "The first line holds N (1 <= N <= 10^4). Each of the next N lines holds a result in the form 'TeamA 2 - 1 TeamB'.",
      "Print one line per team: name, points, goal difference.",
      "4\nLions 2 - 1 Tigers\nBears 0 - 0 Lions\nTigers 3 - 1 Bears\nLions 1 - 2 Bears")
def _(s):
    pts, gf, ga = Counter(), Counter(), Counter()
    for line in rows(s)[1:]:
        a, x, _dash, y, b = line.split()
        x, y = int(x), int(y)
        gf[a] += x
        ga[a] += y
        gf[b] += y
        ga[b] += x
        if x > y:
            pts[a] += 3
        elif y > x:
            pts[b] += 3
        else:
            pts[a] += 1
            pts[b] += 1
    teams = sorted(set(gf) | set(ga), key=lambda t: (-pts[t], -(gf[t] - ga[t]), -gf[t], t))
    return "\n".join(f"{t} {pts[t]} {gf[t] - ga[t]}" for t in teams)


@task("medal-table", "Medal Table",
      "Rank countries by gold medals, then silver, then bronze (all descending), then by name.",
      "The first line holds N (1 <= N <= 10^4). Each of the next N lines holds a country code and its gold, silver and bronze counts.",
      "Print the ranked countries, one per line, with their three counts.",
      "4\nNOR 16 8 13\nGER 12 10 5\nCAN 11 8 10\nUSA 9 8 6")
def _(s):
    entries = [line.split() for line in rows(s)[1:]]
    entries.sort(key=lambda e: (-int(e[1]), -int(e[2]), -int(e[3]), e[0]))
    return "\n".join(" ".join(e) for e in entries)


@task("shop-discount", "Three for Two",
      "A shop runs a 'buy three, pay for two' offer: in every group of three items, the cheapest one is free. The cashier sorts the basket by price from highest to lowest and groups consecutive items in threes. What does the customer pay?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N prices.",
      "Print the amount to pay.",
      "7\n5 3 9 1 4 4 8")
def _(s):
    p = sorted(ints(s)[1:], reverse=True)
    return str(sum(x for i, x in enumerate(p) if i % 3 != 2))


@task("fuel-stops", "Refuelling on a Road Trip",
      "A car can drive D kilometres on a full tank and starts full at kilometre 0. Petrol stations stand at given kilometres along the road. What is the smallest number of stops needed to reach kilometre L?",
      "The first line holds L, D and N (1 <= L, D <= 10^9, 0 <= N <= 10^5). The second line holds the N station positions in increasing order (0 < position < L).",
      "Print the minimum number of stops, or -1 if L cannot be reached.",
      "950 400 4\n200 375 550 750")
def _(s):
    v = ints(s)
    length, d, n = v[0], v[1], v[2]
    stations = v[3:3 + n] + [length]
    pos, stops, i = 0, 0, 0
    while pos + d < length:
        best = None
        while i < len(stations) and stations[i] <= pos + d:
            best = stations[i]
            i += 1
        if best is None or best == pos:
            return "-1"
        pos = best
        stops += 1
    return str(stops)


@task("frog-jumps", "The Frog and the River",
      "A frog at position X wants to reach position Y or beyond, jumping exactly D each time. How many jumps does it need?",
      "One line with three integers X, Y, D (1 <= X <= Y <= 10^18, 1 <= D <= 10^18).",
      "Print the number of jumps.",
      "10 85 30")
def _(s):
    x, y, d = ints(s)
    return str(-(-(y - x) // d))


@task("climbing-stairs", "Climbing Stairs",
      "You climb a staircase of N steps taking 1 or 2 steps at a time. In how many different ways can you reach the top? Print the answer modulo 1000000007.",
      "One line with an integer N (1 <= N <= 10^6).",
      "Print the number of ways modulo 1000000007.",
      "10")
def _(s):
    a, b = 1, 1
    for _ in range(int(s)):
        a, b = b, (a + b) % 1_000_000_007
    return str(a)


@task("queue-simulation", "Waiting at the Counter",
      "Customers arrive at a single counter at given times and each needs a given service time. They are served in arrival order; a customer who arrives while the counter is busy waits. Print each customer's waiting time and the average wait rounded down.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds an arrival time and a service time; arrival times are non-decreasing.",
      "Print the waiting times on one line and the rounded-down average on the next.",
      "4\n0 5\n1 3\n2 8\n20 2")
def _(s):
    v = ints(s)
    n = v[0]
    free, waits = 0, []
    for i in range(n):
        arrive, service = v[1 + 2 * i], v[2 + 2 * i]
        start = max(free, arrive)
        waits.append(start - arrive)
        free = start + service
    return join(waits) + f"\n{sum(waits) // n}"


@task("meeting-rooms", "Meeting Rooms",
      "Meetings are given as [start, end) time intervals. What is the smallest number of rooms that lets every meeting take place? A meeting ending at time t frees its room for one starting at t.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds a start and an end time (start < end).",
      "Print the number of rooms.",
      "5\n0 30\n5 10\n15 20\n10 15\n25 35")
def _(s):
    v = ints(s)
    n = v[0]
    events = []
    for i in range(n):
        events.append((v[1 + 2 * i], 1))
        events.append((v[2 + 2 * i], -1))
    events.sort()
    cur = best = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return str(best)


@task("activity-selection", "Busy Schedule",
      "Given activities with start and end times, choose as many as possible that do not overlap (an activity may start when the previous one ends).",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds a start and an end time (start < end).",
      "Print the maximum number of activities.",
      "6\n1 4\n3 5\n0 6\n5 7\n8 9\n5 9")
def _(s):
    v = ints(s)
    n = v[0]
    acts = sorted(((v[2 + 2 * i], v[1 + 2 * i]) for i in range(n)))
    count, end = 0, None
    for e, st in acts:
        if end is None or st >= end:
            count += 1
            end = e
    return str(count)


@task("merge-intervals", "Merging Bookings",
      "Merge overlapping or touching booking intervals [start, end] and print the merged intervals in order.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds a start and an end (start <= end).",
      "Print the merged intervals, one per line.",
      "5\n1 3\n8 10\n2 6\n15 18\n10 12")
def _(s):
    v = ints(s)
    n = v[0]
    iv = sorted((v[1 + 2 * i], v[2 + 2 * i]) for i in range(n))
    out = [list(iv[0])]
    for a, b in iv[1:]:
        if a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return "\n".join(f"{a} {b}" for a, b in out)


@task("josephus", "Counting Out",
      "N children stand in a circle, numbered 1 to N. Starting from child 1, they count around the circle, and every K-th child leaves. Which child remains last?",
      "One line with two integers N and K (1 <= N, K <= 10^6).",
      "Print the number of the last child.",
      "7 3")
def _(s):
    n, k = ints(s)
    r = 0
    for i in range(2, n + 1):
        r = (r + k) % i
    return str(r + 1)


@task("hanoi-moves", "Tower of Hanoi",
      "Move a tower of N discs from peg A to peg C using peg B, one disc at a time and never placing a larger disc on a smaller one. Print the minimal sequence of moves.",
      "One line with an integer N (1 <= N <= 15).",
      "Print the number of moves, then each move as 'X Y' (move the top disc of peg X to peg Y), one per line.",
      "3")
def _(s):
    out = []

    def move(n, a, b, c):
        if n:
            move(n - 1, a, c, b)
            out.append(f"{a} {c}")
            move(n - 1, b, a, c)

    move(int(s), "A", "B", "C")
    return "\n".join([str(len(out))] + out)


@task("lru-cache", "A Small Cache",
      "A cache holds at most C keys. On each request, if the key is in the cache it is a hit; otherwise it is a miss and the key is added, evicting the least recently used key if the cache is full. A hit also makes the key the most recently used. Count hits and misses.",
      "The first line holds C and N (1 <= C <= 10^5, 1 <= N <= 10^5). The second line holds N keys (integers).",
      "Print the number of hits and misses.",
      "2 7\n1 2 1 3 2 1 3")
def _(s):
    from collections import OrderedDict

    v = ints(s)
    cap, keys = v[0], v[2:]
    cache, hits = OrderedDict(), 0
    for k in keys:
        if k in cache:
            hits += 1
            cache.move_to_end(k)
        else:
            if len(cache) == cap:
                cache.popitem(last=False)
            cache[k] = True
    return f"{hits} {len(keys) - hits}"


@task("text-editor-undo", "Undo and Redo",
      "A tiny editor holds a text, initially empty. The commands are TYPE word (append the word), UNDO (revert the last TYPE or REDO that is not yet undone) and REDO (re-apply the most recently undone change, if no TYPE happened since). Print the final text.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds a command; words are lower-case letters.",
      "Print the final text (an empty text prints EMPTY).",
      "6\nTYPE hello\nTYPE world\nUNDO\nTYPE there\nUNDO\nREDO")
def _(s):
    text, undo, redo = "", [], []
    for line in rows(s)[1:]:
        parts = line.split()
        if parts[0] == "TYPE":
            undo.append(text)
            text += parts[1]
            redo = []
        elif parts[0] == "UNDO" and undo:
            redo.append(text)
            text = undo.pop()
        elif parts[0] == "REDO" and redo:
            undo.append(text)
            text = redo.pop()
    return text or "EMPTY"


@task("postfix-eval", "Reverse Polish Notation",
      "Evaluate an expression in reverse Polish notation with integers and the operators +, - and *.",
      "One line with tokens separated by spaces; the expression is valid.",
      "Print its value.",
      "3 4 + 2 * 7 -")
def _(s):
    stack = []
    for tok in s.split():
        if tok in "+-*" and len(tok) == 1:
            b, a = stack.pop(), stack.pop()
            stack.append(a + b if tok == "+" else a - b if tok == "-" else a * b)
        else:
            stack.append(int(tok))
    return str(stack[0])


@task("calculator", "Pocket Calculator",
      "Evaluate an arithmetic expression with non-negative integers, +, -, * and parentheses. Multiplication binds tighter than addition and subtraction, which are evaluated left to right.",
      "One line with the expression (at most 10^4 characters, spaces may appear anywhere).",
      "Print its value.",
      "2 * (3 + 4) - 10 - 2 * 3")
def _(s):
    toks = re.findall(r"\d+|[-+*()]", s)
    pos = 0

    def expr():
        nonlocal pos
        v = term()
        while pos < len(toks) and toks[pos] in "+-":
            op = toks[pos]
            pos += 1
            w = term()
            v = v + w if op == "+" else v - w
        return v

    def term():
        nonlocal pos
        v = atom()
        while pos < len(toks) and toks[pos] == "*":
            pos += 1
            v *= atom()
        return v

    def atom():
        nonlocal pos
        tok = toks[pos]
        pos += 1
        if tok == "(":
            v = expr()
            pos += 1
            return v
        return int(tok)

    return str(expr())


@task("dice-game", "Dice Duel",
      "Two players roll two dice each round. A player's score for the round is the sum of their dice, doubled if the two dice show the same number. The player with the higher score wins the round. Who wins more rounds?",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds four numbers: player 1's dice and player 2's dice.",
      "Print the rounds won by each player and the overall result: PLAYER 1, PLAYER 2 or TIE.",
      "4\n3 3 6 5\n1 2 2 2\n6 6 6 5\n4 5 3 6")
def _(s):
    a = b = 0
    for line in rows(s)[1:]:
        w, x, y, z = ints(line)
        p = (w + x) * (2 if w == x else 1)
        q = (y + z) * (2 if y == z else 1)
        if p > q:
            a += 1
        elif q > p:
            b += 1
    return f"{a} {b} " + ("PLAYER 1" if a > b else "PLAYER 2" if b > a else "TIE")


@task("snake-and-ladders", "Snakes and Ladders",
      "A board has squares 1 to 100. A player starts on square 1 and moves by die rolls; landing on the foot of a ladder climbs it, landing on a snake's head slides down. A roll that would pass 100 is not moved, and once the player reaches 100 the remaining rolls are ignored. Given the rolls, where does the player stand at the end, and did they reach 100?",
      "The first line holds the number of ladders and snakes L and S. The next L + S lines hold jumps 'from to' (ladders first). The last line holds the die rolls.",
      "Print the final square and WIN if it is 100, otherwise PLAYING.",
      "2 2\n3 22\n50 91\n27 1\n97 78\n2 4 6 6 5 6 6 6 6 6 5 3")
def _(s):
    lines = rows(s)
    ln, sn = ints(lines[0])
    jumps = dict(tuple(ints(lines[1 + i])) for i in range(ln + sn))
    pos = 1
    for r in ints(lines[1 + ln + sn]):
        if pos + r <= 100:
            pos = jumps.get(pos + r, pos + r)
        if pos == 100:
            break
    return f"{pos} {'WIN' if pos == 100 else 'PLAYING'}"


@task("candy-distribution", "Sharing Sweets",
      "Children stand in a line with ratings. Each child gets at least one sweet, and a child with a higher rating than a neighbour gets more sweets than that neighbour. What is the minimum number of sweets?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N ratings.",
      "Print the minimum number of sweets.",
      "6\n1 3 4 5 2 2")
def _(s):
    r = ints(s)[1:]
    n = len(r)
    c = [1] * n
    for i in range(1, n):
        if r[i] > r[i - 1]:
            c[i] = c[i - 1] + 1
    for i in range(n - 2, -1, -1):
        if r[i] > r[i + 1]:
            c[i] = max(c[i], c[i + 1] + 1)
    return str(sum(c))


@task("gas-station-circuit", "Round Trip",
      "Petrol stations stand on a circular road. Station i provides g[i] litres and driving from station i to the next costs c[i] litres. With an empty tank, from which station (1-based) can a car start and drive once around the circle? If several work, print the smallest.",
      "The first line holds N (1 <= N <= 10^5). The second line holds the N amounts g, the third the N costs c.",
      "Print the starting station, or -1 if the circuit is impossible.",
      "5\n1 2 3 4 5\n3 4 5 1 2")
def _(s):
    v = ints(s)
    n = v[0]
    g, c = v[1:1 + n], v[1 + n:1 + 2 * n]
    if sum(g) < sum(c):
        return "-1"
    start, tank = 0, 0
    for i in range(n):
        tank += g[i] - c[i]
        if tank < 0:
            start, tank = i + 1, 0
    return str(start + 1)


@task("jump-game", "Jumping Stones",
      "Stones lie in a row; standing on stone i you may jump forward up to a[i] stones. Starting on the first stone, what is the minimum number of jumps to reach the last stone?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N non-negative integers.",
      "Print the minimum number of jumps, or -1 if the last stone cannot be reached.",
      "7\n2 3 1 1 4 0 1")
def _(s):
    a = ints(s)[1:]
    n = len(a)
    jumps, end, far = 0, 0, 0
    for i in range(n - 1):
        if i > far:
            return "-1"
        far = max(far, i + a[i])
        if i == end:
            if far <= i:
                return "-1"
            jumps += 1
            end = far
    return str(jumps) if end >= n - 1 or n == 1 else "-1"


@task("temperature-stats", "Weather Report",
      "Given hourly temperatures, print the minimum, the maximum, the average with two digits after the decimal point, and the largest rise between two consecutive hours (0 if the temperature never rises).",
      "The first line holds N (1 <= N <= 10^5). The second line holds N integers.",
      "Print the four values separated by spaces.",
      "6\n12 15 11 18 21 17")
def _(s):
    a = ints(s)[1:]
    rise = max([0] + [a[i] - a[i - 1] for i in range(1, len(a))])
    return f"{min(a)} {max(a)} {sum(a) / len(a):.2f} {rise}"


@task("train-schedule", "Next Train",
      "Trains leave a station every F minutes starting at time S (minutes after midnight) until time E inclusive. A passenger arrives at time T. When does the next train leave (a train leaving exactly at T can be caught)?",
      "One line with four integers S, E, F, T (0 <= S <= E < 1440, 1 <= F <= 1440, 0 <= T < 1440).",
      "Print the departure time as HH:MM, or NONE if the last train has left.",
      "360 1320 25 1000")
def _(s):
    st, en, f, t = ints(s)
    if t <= st:
        dep = st
    else:
        dep = st + -(-(t - st) // f) * f
    if dep > en:
        return "NONE"
    return f"{dep // 60:02d}:{dep % 60:02d}"


@task("round-robin-schedule", "Round-Robin Fixtures",
      "In a round-robin tournament with N teams numbered 1 to N, every pair of teams plays once. List all fixtures in lexicographic order of (smaller team, larger team) and print how many there are.",
      "One line with an integer N (2 <= N <= 100).",
      "Print the number of fixtures, then one fixture per line.",
      "4")
def _(s):
    n = int(s)
    pairs = [f"{a} {b}" for a, b in combinations(range(1, n + 1), 2)]
    return "\n".join([str(len(pairs))] + pairs)


@task("seat-allocation", "Seats in a Row",
      "A row of N seats is given as a string of '.' (free) and 'x' (taken). People want to sit with at least one free seat between them and anybody else. How many more people can sit down?",
      "One line with the row (1 to 10^5 characters).",
      "Print the maximum number of additional people.",
      "..x....x..")
def _(s):
    row = list(s.strip())
    count = 0
    for i in range(len(row)):
        if row[i] == "." and (i == 0 or row[i - 1] == ".") and (i == len(row) - 1 or row[i + 1] == "."):
            row[i] = "x"
            count += 1
    return str(count)


@task("typing-time", "Typing on a Phone Keypad",
      "On an old phone keypad, letters are typed by pressing a key several times: 2 is ABC, 3 DEF, 4 GHI, 5 JKL, 6 MNO, 7 PQRS, 8 TUV, 9 WXYZ, and 0 once gives a space. Each press takes one second, and typing two letters on the same key in a row needs a 2 second pause between them. How long does a message take?",
      "One line with a message of upper-case letters and spaces.",
      "Print the time in seconds.",
      "HELLO WORLD")
def _(s):
    keys = ["ABC", "DEF", "GHI", "JKL", "MNO", "PQRS", "TUV", "WXYZ"]
    where = {}
    for k, letters in enumerate(keys):
        for i, ch in enumerate(letters):
            where[ch] = (k, i + 1)
    where[" "] = ("space", 1)
    total, last = 0, None
    for ch in s.rstrip("\n"):
        key, presses = where[ch]
        if key == last:
            total += 2
        total += presses
        last = key
    return str(total)


@task("receipt-total", "Shopping Receipt",
      "Print a receipt: each line of the basket gives an item, a quantity and a unit price in cents. Print each item's line total, then the grand total, formatted as euros with two decimals.",
      "The first line holds N (1 <= N <= 1000). Each of the next N lines holds a name (no spaces), a quantity and a unit price in cents.",
      "Print 'name total' per item, then 'TOTAL total'.",
      "3\nbread 2 249\nmilk 3 119\ncheese 1 1050")
def _(s):
    out, total = [], 0
    for line in rows(s)[1:]:
        name, q, p = line.split()
        t = int(q) * int(p)
        total += t
        out.append(f"{name} {t // 100}.{t % 100:02d}")
    out.append(f"TOTAL {total // 100}.{total % 100:02d}")
    return "\n".join(out)


@task("tip-split", "Splitting the Bill",
      "A group of N friends shares a restaurant bill of B cents and adds a tip of P percent (rounded down to a whole cent). The total is split as evenly as possible in whole cents; the first friends pay one cent more if it does not divide evenly. What does each friend pay?",
      "One line with three integers B, P, N (1 <= B <= 10^9, 0 <= P <= 100, 1 <= N <= 1000).",
      "Print the N amounts in cents, separated by spaces.",
      "10000 15 3")
def _(s):
    b, p, n = ints(s)
    total = b + b * p // 100
    q, r = divmod(total, n)
    return join([q + 1] * r + [q] * (n - r))


# ---------------------------------------------------------------------------------------------
# Algorithms: searching, dynamic programming, graphs, combinatorics, bits


@task("binary-search-first", "First Occurrence",
      "A list is sorted in non-decreasing order. For each query value, print the 1-based position of its first occurrence, or -1 if it is absent.",
      "The first line holds N and Q (1 <= N, Q <= 2*10^5). The second line holds the sorted list, the third the Q queries.",
      "Print Q answers separated by spaces.",
      "8 4\n1 3 3 3 5 8 8 13\n3 8 4 13")
def _(s):
    import bisect

    v = ints(s)
    n, q = v[0], v[1]
    a, qs = v[2:2 + n], v[2 + n:2 + n + q]
    out = []
    for x in qs:
        i = bisect.bisect_left(a, x)
        out.append(i + 1 if i < n and a[i] == x else -1)
    return join(out)


@task("count-in-range", "How Many in Between",
      "For a list of numbers, answer queries: how many numbers x satisfy L <= x <= R?",
      "The first line holds N and Q (1 <= N, Q <= 2*10^5). The second line holds N integers. Each of the next Q lines holds L and R.",
      "Print one answer per line.",
      "7 3\n5 1 9 3 7 3 11\n3 7\n10 20\n0 2")
def _(s):
    import bisect

    v = ints(s)
    n, q = v[0], v[1]
    a = sorted(v[2:2 + n])
    qs = v[2 + n:]
    return "\n".join(str(bisect.bisect_right(a, qs[2 * i + 1]) - bisect.bisect_left(a, qs[2 * i])) for i in range(q))


@task("rotated-minimum", "Minimum of a Rotated List",
      "A list of distinct integers sorted in increasing order was rotated by an unknown amount. Find its minimum and the 1-based position where it stands.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds the rotated list.",
      "Print the minimum and its position.",
      "7\n15 18 22 3 6 9 12")
def _(s):
    a = ints(s)[1:]
    lo, hi = 0, len(a) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] > a[hi]:
            lo = mid + 1
        else:
            hi = mid
    return f"{a[lo]} {lo + 1}"


@task("ship-packages", "Shipping Within D Days",
      "Packages with given weights must be shipped in order within D days; each day the ship carries a prefix of the remaining packages whose total weight does not exceed its capacity. What is the smallest capacity that makes this possible?",
      "The first line holds N and D (1 <= D <= N <= 10^5). The second line holds N weights (1 to 10^4).",
      "Print the minimum capacity.",
      "10 5\n1 2 3 4 5 6 7 8 9 10")
def _(s):
    v = ints(s)
    d, w = v[1], v[2:]

    def days(cap):
        count, load = 1, 0
        for x in w:
            if load + x > cap:
                count += 1
                load = 0
            load += x
        return count

    lo, hi = max(w), sum(w)
    while lo < hi:
        mid = (lo + hi) // 2
        if days(mid) <= d:
            hi = mid
        else:
            lo = mid + 1
    return str(lo)


@task("coin-change-min", "Exact Change",
      "With unlimited coins of the given denominations, what is the fewest number of coins that add up to exactly A?",
      "The first line holds N and A (1 <= N <= 100, 0 <= A <= 10^4). The second line holds N distinct denominations (1 to 10^4).",
      "Print the fewest number of coins, or -1 if A cannot be made.",
      "3 11\n1 5 6")
def _(s):
    v = ints(s)
    a, coins = v[1], v[2:]
    inf = float("inf")
    best = [0] + [inf] * a
    for x in range(1, a + 1):
        for c in coins:
            if c <= x and best[x - c] + 1 < best[x]:
                best[x] = best[x - c] + 1
    return str(best[a]) if best[a] != inf else "-1"


@task("coin-change-ways", "Ways to Pay",
      "With unlimited coins of the given denominations, in how many ways can exactly A be paid? Two ways differ if they use a different number of some coin (order does not matter). Print the count modulo 1000000007.",
      "The first line holds N and A (1 <= N <= 100, 0 <= A <= 10^5). The second line holds N distinct denominations.",
      "Print the number of ways modulo 1000000007.",
      "4 10\n2 5 3 6")
def _(s):
    v = ints(s)
    a, coins = v[1], v[2:]
    ways = [1] + [0] * a
    for c in coins:
        for x in range(c, a + 1):
            ways[x] = (ways[x] + ways[x - c]) % 1_000_000_007
    return str(ways[a])


@task("knapsack", "Packing a Backpack",
      "Items have weights and values. Choose items with total weight at most W to maximise their total value; each item can be taken at most once.",
      "The first line holds N and W (1 <= N <= 100, 1 <= W <= 10^5). Each of the next N lines holds an item's weight and value.",
      "Print the maximum total value.",
      "4 7\n1 1\n3 4\n4 5\n5 7")
def _(s):
    v = ints(s)
    n, cap = v[0], v[1]
    best = [0] * (cap + 1)
    for i in range(n):
        w, val = v[2 + 2 * i], v[3 + 2 * i]
        for x in range(cap, w - 1, -1):
            best[x] = max(best[x], best[x - w] + val)
    return str(best[cap])


@task("longest-common-subsequence", "Longest Common Subsequence",
      "Find the length of the longest sequence of characters that appears, in order but not necessarily contiguously, in both strings.",
      "Two lines, each with a string of lower-case letters (at most 3000 characters).",
      "Print the length.",
      "abcbdab\nbdcaba")
def _(s):
    a, b = rows(s)
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if ca == cb else max(prev[j], cur[j - 1]))
        prev = cur
    return str(prev[-1])


@task("house-robber", "Houses on a Street",
      "Houses stand in a row, each holding some money. A thief cannot rob two adjacent houses. What is the most money the thief can take?",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N non-negative amounts.",
      "Print the maximum amount.",
      "7\n2 7 9 3 1 5 8")
def _(s):
    a = ints(s)[1:]
    take = skip = 0
    for x in a:
        take, skip = skip + x, max(skip, take)
    return str(max(take, skip))


@task("unique-paths-obstacles", "Paths Around Rocks",
      "A robot in a grid moves only right or down, from the top-left to the bottom-right cell, and cannot enter cells with a rock '#'. How many paths are there, modulo 1000000007?",
      "The first line holds R and C (1 <= R, C <= 1000). Each of the next R lines holds C characters '.' or '#'.",
      "Print the number of paths modulo 1000000007.",
      "3 4\n....\n.#..\n#...")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = lines[1:1 + r]
    ways = [0] * c
    ways[0] = 1 if g[0][0] == "." else 0
    for i in range(r):
        for j in range(c):
            if g[i][j] == "#":
                ways[j] = 0
            elif j:
                ways[j] = (ways[j] + ways[j - 1]) % 1_000_000_007
    return str(ways[-1])


@task("min-path-sum", "Cheapest Path",
      "Each cell of a grid has a cost. Moving only right or down from the top-left to the bottom-right cell, what is the smallest total cost of the cells visited (both corners included)?",
      "The first line holds R and C (1 <= R, C <= 1000). Each of the next R lines holds C non-negative integers.",
      "Print the minimum total cost.",
      "3 3\n1 3 1\n1 5 1\n4 2 1")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = [ints(x) for x in lines[1:1 + r]]
    best = [0] * c
    for i in range(r):
        for j in range(c):
            if i == 0 and j == 0:
                best[j] = g[0][0]
            elif i == 0:
                best[j] = best[j - 1] + g[i][j]
            elif j == 0:
                best[j] = best[j] + g[i][j]
            else:
                best[j] = min(best[j], best[j - 1]) + g[i][j]
    return str(best[-1])


@task("longest-palindromic-subsequence", "Palindrome by Deletion",
      "What is the length of the longest palindrome that can be obtained by deleting characters from a string (keeping the order of the rest)?",
      "One line with a string of lower-case letters (1 to 2000 characters).",
      "Print the length.",
      "bbbab")
def _(s):
    t = s.strip()
    n = len(t)
    dp = [[0] * n for _ in range(n)]
    for i in range(n - 1, -1, -1):
        dp[i][i] = 1
        for j in range(i + 1, n):
            dp[i][j] = dp[i + 1][j - 1] + 2 if t[i] == t[j] else max(dp[i + 1][j], dp[i][j - 1])
    return str(dp[0][n - 1])


@task("subset-sum", "Exact Weight",
      "Can some of the given weights (each used at most once) be put on a scale to weigh exactly T?",
      "The first line holds N and T (1 <= N <= 100, 0 <= T <= 10^5). The second line holds N positive weights.",
      "Print YES or NO.",
      "6 9\n3 34 4 12 5 2")
def _(s):
    v = ints(s)
    t, w = v[1], v[2:]
    reach = 1
    for x in w:
        reach |= reach << x
    return "YES" if reach >> t & 1 else "NO"


@task("partition-equal", "Fair Split",
      "Can a set of positive integers be split into two groups with equal sums?",
      "The first line holds N (1 <= N <= 200). The second line holds N integers between 1 and 100.",
      "Print YES or NO.",
      "4\n1 5 11 5")
def _(s):
    w = ints(s)[1:]
    total = sum(w)
    if total % 2:
        return "NO"
    reach = 1
    for x in w:
        reach |= reach << x
    return "YES" if reach >> (total // 2) & 1 else "NO"


@task("min-partition-difference", "Balancing Two Teams",
      "Split players with given strengths into two teams (a team may be empty) so that the difference between the teams' total strengths is as small as possible. Print that difference.",
      "The first line holds N (1 <= N <= 100). The second line holds N strengths between 1 and 1000.",
      "Print the minimum difference.",
      "5\n3 1 4 2 2")
def _(s):
    w = ints(s)[1:]
    total = sum(w)
    reach = 1
    for x in w:
        reach |= reach << x
    return str(min(abs(total - 2 * k) for k in range(total + 1) if reach >> k & 1))


@task("word-break", "Splitting into Words",
      "Can a string be split into a sequence of one or more dictionary words? Words may be reused.",
      "The first line holds the string (at most 1000 lower-case letters). The second line holds N, and the third N dictionary words.",
      "Print YES or NO.",
      "applepenapple\n2\napple pen")
def _(s):
    lines = rows(s)
    t = lines[0]
    words_ = set(lines[2].split())
    ok = [True] + [False] * len(t)
    for i in range(1, len(t) + 1):
        ok[i] = any(ok[j] and t[j:i] in words_ for j in range(i))
    return "YES" if ok[-1] else "NO"


@task("decode-ways", "Decoding Digits",
      "Letters are encoded as numbers: A is 1, B is 2, ..., Z is 26. In how many ways can a string of digits be decoded? Print the count modulo 1000000007.",
      "One line with a string of digits (1 to 10^5 characters).",
      "Print the number of decodings modulo 1000000007 (0 if there is none).",
      "11106")
def _(s):
    t = s.strip()
    prev, cur = 1, 1 if t[0] != "0" else 0
    for i in range(1, len(t)):
        nxt = cur if t[i] != "0" else 0
        if 10 <= int(t[i - 1:i + 1]) <= 26:
            nxt += prev
        prev, cur = cur, nxt % 1_000_000_007
    return str(cur)


@task("rod-cutting", "Cutting a Rod",
      "A rod of length N can be cut into pieces of integer length; a piece of length i sells for p[i]. What is the most money the rod can bring?",
      "The first line holds N (1 <= N <= 10^4). The second line holds p[1] to p[N].",
      "Print the maximum revenue.",
      "8\n1 5 8 9 10 17 17 20")
def _(s):
    v = ints(s)
    n, p = v[0], v[1:]
    best = [0] * (n + 1)
    for length in range(1, n + 1):
        best[length] = max(p[i - 1] + best[length - i] for i in range(1, length + 1))
    return str(best[n])


@task("min-jumps-cost", "Frog on Stones",
      "A frog on stone 1 wants to reach stone N. From stone i it can jump to stone i+1 or i+2, paying the absolute difference of the stones' heights. What is the minimum total cost?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N heights.",
      "Print the minimum cost.",
      "6\n30 10 60 10 60 50")
def _(s):
    h = ints(s)[1:]
    n = len(h)
    cost = [0] * n
    for i in range(1, n):
        cost[i] = cost[i - 1] + abs(h[i] - h[i - 1])
        if i > 1:
            cost[i] = min(cost[i], cost[i - 2] + abs(h[i] - h[i - 2]))
    return str(cost[-1])


@task("max-square", "Largest Square Field",
      "A field map shows usable cells '1' and unusable cells '0'. Find the area of the largest square made only of usable cells.",
      "The first line holds R and C (1 <= R, C <= 1000). Each of the next R lines holds C characters 0 or 1.",
      "Print the area of the largest square.",
      "4 5\n10100\n10111\n11111\n10010")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = lines[1:1 + r]
    best, prev = 0, [0] * (c + 1)
    for i in range(r):
        cur = [0] * (c + 1)
        for j in range(c):
            if g[i][j] == "1":
                cur[j + 1] = min(prev[j], prev[j + 1], cur[j]) + 1
                best = max(best, cur[j + 1])
        prev = cur
    return str(best * best)


@task("catalan", "Balanced Parentheses Count",
      "How many strings of N pairs of parentheses are balanced? Print the count modulo 1000000007.",
      "One line with an integer N (0 <= N <= 10^5).",
      "Print the count modulo 1000000007.",
      "5")
def _(s):
    n, mod = int(s), 1_000_000_007
    num = den = 1
    for i in range(1, n + 1):
        num = num * (n + i) % mod
        den = den * i % mod
    den = den * (n + 1) % mod
    return str(num * pow(den, mod - 2, mod) % mod)


@task("binomial-mod", "Choosing a Committee",
      "In how many ways can a committee of K people be chosen from N candidates? Print the answer modulo 1000000007.",
      "One line with two integers N and K (0 <= K <= N <= 10^6).",
      "Print C(N, K) modulo 1000000007.",
      "52 5")
def _(s):
    n, k = ints(s)
    return str(math.comb(n, k) % 1_000_000_007)


@task("next-permutation", "Next Arrangement",
      "Print the next permutation of a sequence in lexicographic order. If the sequence is the last permutation, print the first one (sorted ascending).",
      "The first line holds N (1 <= N <= 10^5). The second line holds N integers.",
      "Print the next permutation.",
      "5\n1 3 5 4 2")
def _(s):
    a = ints(s)[1:]
    i = len(a) - 2
    while i >= 0 and a[i] >= a[i + 1]:
        i -= 1
    if i < 0:
        return join(sorted(a))
    j = len(a) - 1
    while a[j] <= a[i]:
        j -= 1
    a[i], a[j] = a[j], a[i]
    a[i + 1:] = reversed(a[i + 1:])
    return join(a)


@task("kth-permutation", "K-th Permutation",
      "List the permutations of the numbers 1 to N in lexicographic order. Print the K-th one.",
      "One line with two integers N and K (1 <= N <= 20, 1 <= K <= N!).",
      "Print the K-th permutation.",
      "4 9")
def _(s):
    n, k = ints(s)
    nums = list(range(1, n + 1))
    k -= 1
    out = []
    for i in range(n, 0, -1):
        f = math.factorial(i - 1)
        out.append(nums.pop(k // f))
        k %= f
    return join(out)


@task("all-permutations", "All Arrangements",
      "Print every arrangement of the distinct letters of a word, in alphabetical order.",
      "One line with a word of 1 to 8 distinct lower-case letters.",
      "Print the number of arrangements, then each arrangement on its own line.",
      "cab")
def _(s):
    perms = sorted("".join(p) for p in permutations(s.strip()))
    return "\n".join([str(len(perms))] + perms)


@task("subsets-with-sum", "Subsets with a Target Sum",
      "Count the subsets of N numbers (chosen by position) whose elements add up to T. The empty subset has sum 0.",
      "The first line holds N and T (1 <= N <= 20, |T| <= 10^9). The second line holds N integers.",
      "Print the number of subsets.",
      "5 10\n2 4 6 8 4")
def _(s):
    v = ints(s)
    n, t, a = v[0], v[1], v[2:]
    return str(sum(1 for mask in range(1 << n) if sum(a[i] for i in range(n) if mask >> i & 1) == t))


@task("n-queens", "Peaceful Queens",
      "In how many ways can N queens be placed on an N x N chessboard so that no two attack each other?",
      "One line with an integer N (1 <= N <= 12).",
      "Print the number of placements.",
      "6")
def _(s):
    n = int(s)

    def place(row, cols, d1, d2):
        if row == n:
            return 1
        total = 0
        for c in range(n):
            if c not in cols and row + c not in d1 and row - c not in d2:
                total += place(row + 1, cols | {c}, d1 | {row + c}, d2 | {row - c})
        return total

    return str(place(0, frozenset(), frozenset(), frozenset()))


@task("generate-parentheses", "Writing Balanced Parentheses",
      "Print all balanced strings of N pairs of parentheses in lexicographic order, where '(' comes before ')'.",
      "One line with an integer N (1 <= N <= 8).",
      "Print one string per line.",
      "3")
def _(s):
    n = int(s)
    out = []

    def build(cur, opened, closed):
        if len(cur) == 2 * n:
            out.append(cur)
            return
        if opened < n:
            build(cur + "(", opened + 1, closed)
        if closed < opened:
            build(cur + ")", opened, closed + 1)

    build("", 0, 0)
    return "\n".join(out)


@task("connected-components", "Groups of Friends",
      "N people are numbered 1 to N, and M pairs of them are friends. Friendship groups are formed by friends, friends of friends, and so on. How many groups are there, and how large is the largest?",
      "The first line holds N and M (1 <= N <= 10^5, 0 <= M <= 2*10^5). Each of the next M lines holds a pair of friends.",
      "Print the number of groups and the size of the largest.",
      "8 5\n1 2\n2 3\n4 5\n6 7\n7 4")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    parent = list(range(n + 1))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in range(m):
        a, b = find(v[2 + 2 * i]), find(v[3 + 2 * i])
        parent[a] = b
    sizes = Counter(find(x) for x in range(1, n + 1))
    return f"{len(sizes)} {max(sizes.values())}"


@task("shortest-path-unweighted", "Fewest Flights",
      "Cities are numbered 1 to N and M direct flights connect pairs of cities in both directions. What is the fewest number of flights from city S to city T?",
      "The first line holds N, M, S, T (1 <= N <= 10^5, 0 <= M <= 2*10^5). Each of the next M lines holds a pair of cities.",
      "Print the fewest flights, or -1 if T cannot be reached.",
      "6 6 1 6\n1 2\n2 3\n3 6\n1 4\n4 5\n5 6")
def _(s):
    v = ints(s)
    n, m, st, t = v[:4]
    adj = [[] for _ in range(n + 1)]
    for i in range(m):
        a, b = v[4 + 2 * i], v[5 + 2 * i]
        adj[a].append(b)
        adj[b].append(a)
    dist = [-1] * (n + 1)
    dist[st] = 0
    q = deque([st])
    while q:
        x = q.popleft()
        for y in adj[x]:
            if dist[y] < 0:
                dist[y] = dist[x] + 1
                q.append(y)
    return str(dist[t])


@task("dijkstra", "Cheapest Route",
      "Towns are numbered 1 to N and M one-way roads have tolls. What is the cheapest total toll from town 1 to each town?",
      "The first line holds N and M (1 <= N <= 10^5, 0 <= M <= 2*10^5). Each of the next M lines holds a road: from, to, toll (0 to 10^9).",
      "Print N values: the cheapest toll to each town from 1 to N, or -1 for unreachable towns.",
      "5 7\n1 2 4\n1 3 1\n3 2 2\n2 4 1\n3 4 5\n4 5 3\n5 1 1")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    adj = [[] for _ in range(n + 1)]
    for i in range(m):
        a, b, w = v[2 + 3 * i:5 + 3 * i]
        adj[a].append((b, w))
    dist = [None] * (n + 1)
    heap = [(0, 1)]
    while heap:
        d, x = heappop(heap)
        if dist[x] is not None:
            continue
        dist[x] = d
        for y, w in adj[x]:
            if dist[y] is None:
                heappush(heap, (d + w, y))
    return join(-1 if d is None else d for d in dist[1:])


@task("cycle-detection", "Circular Dependencies",
      "A build system has N tasks numbered 1 to N, and M rules 'a b' meaning task a must finish before task b. Decide whether the rules contain a cycle, which would make the build impossible.",
      "The first line holds N and M (1 <= N <= 10^5, 0 <= M <= 2*10^5). Each of the next M lines holds a rule.",
      "Print CYCLE or NO CYCLE.",
      "4 4\n1 2\n2 3\n3 4\n4 2")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    indeg = [0] * (n + 1)
    adj = [[] for _ in range(n + 1)]
    for i in range(m):
        a, b = v[2 + 2 * i], v[3 + 2 * i]
        adj[a].append(b)
        indeg[b] += 1
    q = deque(x for x in range(1, n + 1) if indeg[x] == 0)
    done = 0
    while q:
        x = q.popleft()
        done += 1
        for y in adj[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                q.append(y)
    return "NO CYCLE" if done == n else "CYCLE"


@task("topological-order", "Order of Courses",
      "N courses are numbered 1 to N, and M prerequisites 'a b' say course a must be taken before course b. Print an order in which all courses can be taken; when several courses are available, take the one with the smallest number first.",
      "The first line holds N and M (1 <= N <= 10^5, 0 <= M <= 2*10^5). Each of the next M lines holds a prerequisite.",
      "Print the order, or IMPOSSIBLE if the prerequisites contain a cycle.",
      "6 6\n5 2\n5 1\n4 1\n4 3\n2 3\n3 6")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    indeg = [0] * (n + 1)
    adj = [[] for _ in range(n + 1)]
    for i in range(m):
        a, b = v[2 + 2 * i], v[3 + 2 * i]
        adj[a].append(b)
        indeg[b] += 1
    heap = [x for x in range(1, n + 1) if indeg[x] == 0]
    heap.sort()
    out = []
    while heap:
        x = heappop(heap)
        out.append(x)
        for y in adj[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                heappush(heap, y)
    return join(out) if len(out) == n else "IMPOSSIBLE"


@task("bipartite", "Two Teams",
      "N children are numbered 1 to N, and M pairs of them refuse to be on the same team. Can the children be split into two teams so that no such pair shares a team?",
      "The first line holds N and M (1 <= N <= 10^5, 0 <= M <= 2*10^5). Each of the next M lines holds a pair.",
      "Print YES or NO.",
      "5 5\n1 2\n2 3\n3 4\n4 5\n5 1")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    adj = [[] for _ in range(n + 1)]
    for i in range(m):
        a, b = v[2 + 2 * i], v[3 + 2 * i]
        adj[a].append(b)
        adj[b].append(a)
    colour = [-1] * (n + 1)
    for start in range(1, n + 1):
        if colour[start] >= 0:
            continue
        colour[start] = 0
        q = deque([start])
        while q:
            x = q.popleft()
            for y in adj[x]:
                if colour[y] < 0:
                    colour[y] = 1 - colour[x]
                    q.append(y)
                elif colour[y] == colour[x]:
                    return "NO"
    return "YES"


@task("minimum-spanning-tree", "Connecting the Villages",
      "N villages are numbered 1 to N. Building a road between two villages has a given cost. What is the cheapest way to connect all villages so that any village can reach any other?",
      "The first line holds N and M (1 <= N <= 10^5, 0 <= M <= 2*10^5). Each of the next M lines holds a possible road: two villages and its cost.",
      "Print the minimum total cost, or IMPOSSIBLE if the villages cannot all be connected.",
      "5 7\n1 2 4\n1 3 3\n2 3 1\n2 4 2\n3 4 4\n4 5 6\n3 5 7")
def _(s):
    v = ints(s)
    n, m = v[0], v[1]
    edges = sorted((v[4 + 3 * i], v[2 + 3 * i], v[3 + 3 * i]) for i in range(m))
    parent = list(range(n + 1))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    total, used = 0, 0
    for w, a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            total += w
            used += 1
    return str(total) if used == n - 1 else "IMPOSSIBLE"


@task("tree-diameter", "Longest Trail",
      "A park's N clearings, numbered 1 to N, are joined by N - 1 trails of length 1 so that every clearing can be reached from every other. What is the length of the longest route between two clearings (without repeating a trail)?",
      "The first line holds N (1 <= N <= 10^5). Each of the next N - 1 lines holds two clearings joined by a trail.",
      "Print the length of the longest route.",
      "7\n1 2\n2 3\n2 4\n4 5\n5 6\n4 7")
def _(s):
    v = ints(s)
    n = v[0]
    adj = [[] for _ in range(n + 1)]
    for i in range(n - 1):
        a, b = v[1 + 2 * i], v[2 + 2 * i]
        adj[a].append(b)
        adj[b].append(a)

    def farthest(start):
        dist = [-1] * (n + 1)
        dist[start] = 0
        q = deque([start])
        while q:
            x = q.popleft()
            for y in adj[x]:
                if dist[y] < 0:
                    dist[y] = dist[x] + 1
                    q.append(y)
        best = max(range(1, n + 1), key=lambda x: dist[x])
        return best, dist[best]

    far, _ = farthest(1)
    return str(farthest(far)[1])


@task("employee-hierarchy", "Chain of Command",
      "In a company of N employees numbered 1 to N, employee 1 is the CEO and every other employee has one direct manager. For each employee, count how many people report to them directly or indirectly.",
      "The first line holds N (1 <= N <= 10^5). The second line holds the managers of employees 2 to N.",
      "Print N counts.",
      "6\n1 1 2 2 4")
def _(s):
    v = ints(s)
    n, boss = v[0], v[1:]
    children = [[] for _ in range(n + 1)]
    for i, b in enumerate(boss, 2):
        children[b].append(i)
    order, stack = [], [1]
    while stack:
        x = stack.pop()
        order.append(x)
        stack.extend(children[x])
    count = [0] * (n + 1)
    for x in reversed(order):
        count[x] = sum(count[c] + 1 for c in children[x])
    return join(count[1:])


@task("word-ladder", "Word Ladder",
      "Change a start word into a target word one letter at a time, where every intermediate word must be in the dictionary. How many words does the shortest ladder contain, counting both the start and the target?",
      "The first line holds the start and target words. The second line holds N, and the third N dictionary words (all words have the same length).",
      "Print the length of the shortest ladder, or 0 if there is none.",
      "hit cog\n6\nhot dot dog lot log cog")
def _(s):
    lines = rows(s)
    start, target = lines[0].split()
    words_ = set(lines[2].split())
    if target not in words_:
        return "0"
    dist = {start: 1}
    q = deque([start])
    while q:
        w = q.popleft()
        if w == target:
            return str(dist[w])
        for i in range(len(w)):
            for ch in "abcdefghijklmnopqrstuvwxyz":
                nw = w[:i] + ch + w[i + 1:]
                if nw in words_ and nw not in dist:
                    dist[nw] = dist[w] + 1
                    q.append(nw)
    return "0"


@task("rotting-oranges", "Rotting Oranges",
      "In a crate, each cell is empty '.', a fresh orange 'F' or a rotten orange 'R'. Every minute, fresh oranges next to a rotten one (up, down, left, right) rot. After how many minutes are no fresh oranges left?",
      "The first line holds R and C (1 <= R, C <= 1000). Each of the next R lines holds C characters.",
      "Print the number of minutes, or -1 if some orange never rots.",
      "3 3\nRFF\nFF.\n.FF")
def _(s):
    lines = rows(s)
    r, c = ints(lines[0])
    g = [list(x) for x in lines[1:1 + r]]
    q = deque((i, j, 0) for i in range(r) for j in range(c) if g[i][j] == "R")
    last = 0
    while q:
        i, j, t = q.popleft()
        last = max(last, t)
        for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            x, y = i + di, j + dj
            if 0 <= x < r and 0 <= y < c and g[x][y] == "F":
                g[x][y] = "R"
                q.append((x, y, t + 1))
    return "-1" if any("F" in row for row in g) else str(last)


@task("popcount", "Counting Ones",
      "Count the 1 bits in the binary representation of each of several numbers.",
      "The first line holds N (1 <= N <= 10^5). The second line holds N integers between 0 and 10^18.",
      "Print N counts.",
      "5\n0 7 8 255 1023")
def _(s):
    return join(bin(x).count("1") for x in ints(s)[1:])


@task("gray-code", "Gray Code",
      "Print the N-bit reflected Gray code sequence, where consecutive codes differ in exactly one bit, starting from all zeros.",
      "One line with an integer N (1 <= N <= 16).",
      "Print the 2^N codes as N-bit binary strings, one per line.",
      "3")
def _(s):
    n = int(s)
    return "\n".join(format(i ^ (i >> 1), f"0{n}b") for i in range(1 << n))


@task("xor-range", "XOR of a Range",
      "Compute A xor (A+1) xor ... xor B.",
      "One line with two integers A and B (0 <= A <= B <= 10^18).",
      "Print the result.",
      "3 9")
def _(s):
    a, b = ints(s)

    def upto(n):
        return [n, 1, n + 1, 0][n % 4] if n >= 0 else 0

    return str(upto(b) ^ upto(a - 1))


@task("single-number", "The Lonely Number",
      "In a list, every value appears exactly twice except one, which appears once. Find it.",
      "The first line holds N (1 <= N <= 2*10^5, N odd). The second line holds N integers.",
      "Print the value that appears once.",
      "7\n4 1 2 1 2 9 4")
def _(s):
    r = 0
    for x in ints(s)[1:]:
        r ^= x
    return str(r)


@task("power-of-two", "Power of Two",
      "For each number, decide whether it is a power of two (1, 2, 4, 8, ...).",
      "The first line holds N (1 <= N <= 10^5). The second line holds N integers between 0 and 10^18.",
      "Print YES or NO for each number, separated by spaces.",
      "5\n1 6 64 0 1024")
def _(s):
    return join("YES" if x > 0 and x & (x - 1) == 0 else "NO" for x in ints(s)[1:])


@task("bit-flips", "Flipping Bits",
      "How many bits must be flipped to turn A into B?",
      "One line with two integers A and B (0 <= A, B <= 10^18).",
      "Print the number of differing bits.",
      "29 15")
def _(s):
    a, b = ints(s)
    return str(bin(a ^ b).count("1"))


@task("count-set-bits-total", "Ones from 1 to N",
      "Count the total number of 1 bits in the binary representations of all integers from 1 to N.",
      "One line with an integer N (1 <= N <= 10^18).",
      "Print the total.",
      "17")
def _(s):
    n = int(s)
    total, bit = 0, 0
    while (1 << bit) <= n:
        cycle = 1 << (bit + 1)
        full = (n + 1) // cycle * (cycle // 2)
        rest = max(0, (n + 1) % cycle - cycle // 2)
        total += full + rest
        bit += 1
    return str(total)


@task("sieve-twin-primes", "Twin Primes",
      "Twin primes are pairs of primes that differ by 2, such as (11, 13). List the twin prime pairs with both members at most N.",
      "One line with an integer N (1 <= N <= 10^6).",
      "Print the number of pairs on the first line and the pairs, one per line, in increasing order.",
      "50")
def _(s):
    n = int(s)
    sieve = bytearray([1]) * (n + 1)
    sieve[0:2] = b"\x00\x00"[:min(2, n + 1)]
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(sieve[i * i::i]))
    pairs = [(p, p + 2) for p in range(2, n - 1) if sieve[p] and sieve[p + 2]]
    return "\n".join([str(len(pairs))] + [f"{a} {b}" for a, b in pairs])


@task("goldbach", "Goldbach Pairs",
      "Goldbach's conjecture says every even number greater than 2 is the sum of two primes. For an even N, print the decomposition N = p + q with p <= q and p as small as possible, and the number of such decompositions.",
      "One line with an even integer N (4 <= N <= 10^6).",
      "Print p and q on the first line and the number of decompositions on the second.",
      "100")
def _(s):
    n = int(s)
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(sieve[i * i::i]))
    pairs = [(p, n - p) for p in range(2, n // 2 + 1) if sieve[p] and sieve[n - p]]
    return f"{pairs[0][0]} {pairs[0][1]}\n{len(pairs)}"


@task("euler-totient", "Coprime Count",
      "Count the integers k with 1 <= k <= N that share no common factor with N other than 1.",
      "One line with an integer N (1 <= N <= 10^12).",
      "Print the count.",
      "36")
def _(s):
    n = int(s)
    result, p, m = n, 2, n
    while p * p <= m:
        if m % p == 0:
            while m % p == 0:
                m //= p
            result -= result // p
        p += 1
    if m > 1:
        result -= result // m
    return str(result)


@task("modular-inverse", "Modular Inverse",
      "Find the integer x with 0 <= x < M such that A * x leaves remainder 1 when divided by M.",
      "One line with two integers A and M (1 <= A, M <= 10^18, M >= 2).",
      "Print x, or NONE if no such x exists.",
      "17 3120")
def _(s):
    a, m = ints(s)
    if math.gcd(a, m) != 1:
        return "NONE"
    return str(pow(a, -1, m))


@task("lcm-range", "Smallest Common Multiple",
      "Find the smallest positive number that is divisible by every integer from 1 to N, modulo 1000000007.",
      "One line with an integer N (1 <= N <= 10^5).",
      "Print the number modulo 1000000007.",
      "20")
def _(s):
    n = int(s)
    r = 1
    for i in range(1, n + 1):
        r = r * i // math.gcd(r, i)
    return str(r % 1_000_000_007)


@task("pythagorean-triples", "Pythagorean Triples",
      "List all triples of integers a < b < c <= N with a^2 + b^2 = c^2.",
      "One line with an integer N (1 <= N <= 1000).",
      "Print the number of triples, then each triple on its own line, ordered by a, then b.",
      "20")
def _(s):
    n = int(s)
    out = []
    for a in range(1, n + 1):
        for b in range(a + 1, n + 1):
            c = math.isqrt(a * a + b * b)
            if c <= n and c * c == a * a + b * b:
                out.append(f"{a} {b} {c}")
    return "\n".join([str(len(out))] + out)


@task("spiral-number", "Number Spiral",
      "The numbers 1, 2, 3, ... are written in a spiral on a grid: 1 at the centre, 2 to its right, then counter-clockwise outward (3 above 2, 4 left of 3, and so on). What number is at column x, row y, with the centre at (0, 0), x increasing to the right and y increasing upwards?",
      "One line with two integers x and y (|x|, |y| <= 10^9).",
      "Print the number at (x, y).",
      "-1 2")
def _(s):
    x, y = ints(s)
    k = max(abs(x), abs(y))
    if k == 0:
        return "1"
    last = (2 * k + 1) ** 2  # at (k, -k)
    side = 2 * k
    if y == -k:
        return str(last - (k - x))
    if x == -k:
        return str(last - side - (y + k))
    if y == k:
        return str(last - 2 * side - (x + k))
    return str(last - 3 * side - (k - y))


@task("digits-count-in-range", "Counting Digits on Pages",
      "A book has pages numbered 1 to N. How many times is each digit 0 to 9 printed?",
      "One line with an integer N (1 <= N <= 10^6).",
      "Print ten counts, for the digits 0 to 9.",
      "120")
def _(s):
    c = Counter("".join(str(i) for i in range(1, int(s) + 1)))
    return join(c[str(d)] for d in range(10))


@task("self-numbers", "Digit Addition Chains",
      "For a number n, let d(n) be n plus the sum of its digits (d(75) = 75 + 7 + 5 = 87). A number is a self number if it is not d(n) for any n. List the self numbers up to N.",
      "One line with an integer N (1 <= N <= 10^5).",
      "Print the self numbers up to N separated by spaces.",
      "100")
def _(s):
    n = int(s)
    generated = {k + sum(map(int, str(k))) for k in range(1, n + 1)}
    return join(k for k in range(1, n + 1) if k not in generated)


@task("amicable-pairs", "Amicable Numbers",
      "Two different numbers are amicable if each is the sum of the proper divisors of the other, such as 220 and 284. List the amicable pairs whose members are both at most N.",
      "One line with an integer N (1 <= N <= 10^5).",
      "Print each pair 'a b' with a < b on its own line in increasing order of a, or NONE.",
      "10000")
def _(s):
    n = int(s)
    d = [0] * (n + 1)
    for i in range(1, n // 2 + 1):
        for j in range(2 * i, n + 1, i):
            d[j] += i
    out = [f"{a} {d[a]}" for a in range(2, n + 1) if a < d[a] <= n and d[d[a]] == a]
    return "\n".join(out) if out else "NONE"


@task("kaprekar-routine", "Kaprekar's Routine",
      "Take a four-digit number with at least two different digits (leading zeros allowed). Arrange its digits in descending and ascending order to get two numbers and subtract the smaller from the larger, keeping four digits. Repeating this always reaches 6174. How many steps does it take?",
      "One line with a four-digit string (0000 to 9999, not all digits equal).",
      "Print the number of steps to reach 6174 (0 if the number is 6174).",
      "3524")
def _(s):
    n, steps = s.strip(), 0
    while n != "6174":
        big = int("".join(sorted(n, reverse=True)))
        small = int("".join(sorted(n)))
        n = f"{big - small:04d}"
        steps += 1
    return str(steps)


@task("look-and-say", "Look and Say",
      "The look-and-say sequence starts with 1; each term describes the previous one by reading off runs of digits (1 is 'one 1' = 11, then 21, 1211, 111221, ...). Print the N-th term.",
      "One line with an integer N (1 <= N <= 40).",
      "Print the N-th term.",
      "7")
def _(s):
    t = "1"
    for _ in range(int(s) - 1):
        t = "".join(f"{len(m.group(0))}{m.group(1)}" for m in re.finditer(r"(\d)\1*", t))
    return t


@task("balanced-split-string", "Balanced Halves",
      "A string of L and R characters is balanced if it has equally many of each. Split a balanced string into as many balanced contiguous pieces as possible. How many pieces are there?",
      "One line with a balanced string of L and R (2 to 10^5 characters).",
      "Print the maximum number of pieces.",
      "RLRRLLRLRL")
def _(s):
    bal = count = 0
    for ch in s.strip():
        bal += 1 if ch == "R" else -1
        if bal == 0:
            count += 1
    return str(count)


@task("min-platforms", "Railway Platforms",
      "Trains arrive and depart at given times (minutes after midnight). A platform used by a train departing at time t can take a train arriving at t + 1 or later. What is the minimum number of platforms the station needs?",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds a train's arrival and departure times (arrival <= departure).",
      "Print the minimum number of platforms.",
      "6\n540 550\n560 720\n570 680\n660 690\n900 920\n905 1200")
def _(s):
    v = ints(s)
    n = v[0]
    arr = sorted(v[1 + 2 * i] for i in range(n))
    dep = sorted(v[2 + 2 * i] for i in range(n))
    i = j = cur = best = 0
    while i < n:
        if arr[i] <= dep[j]:
            cur += 1
            best = max(best, cur)
            i += 1
        else:
            cur -= 1
            j += 1
    return str(best)


@task("huffman-cost", "Merging Files",
      "Merging two files of sizes a and b costs a + b and produces a file of size a + b. What is the minimum total cost of merging N files into one?",
      "The first line holds N (1 <= N <= 10^5). The second line holds N file sizes.",
      "Print the minimum total cost.",
      "5\n4 3 2 6 8")
def _(s):
    heap = ints(s)[1:]
    heap.sort()
    total = 0
    while len(heap) > 1:
        a, b = heappop(heap), heappop(heap)
        total += a + b
        heappush(heap, a + b)
    return str(total)


@task("task-scheduler-deadlines", "Meeting Deadlines",
      "Each job takes one day and earns its profit only if finished on or before its deadline (day 1 is the first day). At most one job can be done per day. What is the largest total profit?",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds a job's deadline and profit.",
      "Print the number of jobs done and the total profit.",
      "5\n2 100\n1 19\n2 27\n1 25\n3 15")
def _(s):
    v = ints(s)
    n = v[0]
    jobs = sorted(((v[1 + 2 * i], v[2 + 2 * i]) for i in range(n)))
    heap = []
    for deadline, profit in jobs:
        heappush(heap, profit)
        if len(heap) > deadline:
            heappop(heap)
    return f"{len(heap)} {sum(heap)}"


@task("sliding-window-maximum", "Maximum in Every Window",
      "For every block of K consecutive elements of a list, print its maximum.",
      "The first line holds N and K (1 <= K <= N <= 2*10^5). The second line holds N integers.",
      "Print N - K + 1 maxima.",
      "8 3\n1 3 -1 -3 5 3 6 7")
def _(s):
    v = ints(s)
    k, a = v[1], v[2:]
    dq, out = deque(), []
    for i, x in enumerate(a):
        while dq and a[dq[-1]] <= x:
            dq.pop()
        dq.append(i)
        if dq[0] <= i - k:
            dq.popleft()
        if i >= k - 1:
            out.append(a[dq[0]])
    return join(out)


@task("minimum-window-distinct", "Shortest Stretch with Every Kind",
      "A shelf holds N items of various kinds. Find the length of the shortest contiguous stretch of the shelf that contains at least one item of every kind present on the shelf.",
      "The first line holds N (1 <= N <= 2*10^5). The second line holds N kind numbers.",
      "Print the length of the shortest stretch.",
      "8\n1 2 2 3 1 1 3 2")
def _(s):
    a = ints(s)[1:]
    need = len(set(a))
    count, have, best, lo = Counter(), 0, len(a), 0
    for hi, x in enumerate(a):
        count[x] += 1
        if count[x] == 1:
            have += 1
        while have == need:
            best = min(best, hi - lo + 1)
            count[a[lo]] -= 1
            if count[a[lo]] == 0:
                have -= 1
            lo += 1
    return str(best)


@task("anagram-substrings", "Hidden Anagrams",
      "Count the positions at which a contiguous substring of the text is an anagram of the pattern.",
      "The first line holds the text, the second the pattern (lower-case letters, at most 10^5 characters each).",
      "Print the number of positions.",
      "cbaebabacd\nabc")
def _(s):
    text, pat = rows(s)
    k = len(pat)
    if k > len(text):
        return "0"
    need, win = Counter(pat), Counter(text[:k])
    count = int(win == need)
    for i in range(k, len(text)):
        win[text[i]] += 1
        win[text[i - k]] -= 1
        if win[text[i - k]] == 0:
            del win[text[i - k]]
        count += int(win == need)
    return str(count)


@task("longest-repeat-k", "Longest Substring with K Distinct",
      "Find the length of the longest contiguous substring that contains at most K distinct characters.",
      "The first line holds the string (lower-case letters, 1 to 10^5 characters). The second line holds K (1 <= K <= 26).",
      "Print the length.",
      "eceebaaab\n2")
def _(s):
    t, k = rows(s)
    k = int(k)
    count, lo, best = Counter(), 0, 0
    for hi, ch in enumerate(t):
        count[ch] += 1
        while len(count) > k:
            count[t[lo]] -= 1
            if count[t[lo]] == 0:
                del count[t[lo]]
            lo += 1
        best = max(best, hi - lo + 1)
    return str(best)


@task("two-pointer-triplets", "Three That Sum to Zero",
      "Count the distinct triples of values (a, b, c) with a <= b <= c, taken from different positions of a list, such that a + b + c = 0.",
      "The first line holds N (3 <= N <= 3000). The second line holds N integers.",
      "Print the number of distinct value triples.",
      "7\n-1 0 1 2 -1 -4 2")
def _(s):
    a = sorted(ints(s)[1:])
    found = set()
    n = len(a)
    for i in range(n):
        lo, hi = i + 1, n - 1
        while lo < hi:
            t = a[i] + a[lo] + a[hi]
            if t == 0:
                found.add((a[i], a[lo], a[hi]))
                lo += 1
                hi -= 1
            elif t < 0:
                lo += 1
            else:
                hi -= 1
    return str(len(found))


@task("prefix-xor-queries", "XOR Queries",
      "Answer queries on a list: each asks for the XOR of the elements from position l to position r (1-based, inclusive).",
      "The first line holds N and Q (1 <= N, Q <= 2*10^5). The second line holds N integers. Each of the next Q lines holds l and r.",
      "Print one answer per line.",
      "5 3\n1 3 4 8 2\n1 2\n2 4\n1 5")
def _(s):
    v = ints(s)
    n, q = v[0], v[1]
    pre = [0]
    for x in v[2:2 + n]:
        pre.append(pre[-1] ^ x)
    qs = v[2 + n:]
    return "\n".join(str(pre[qs[2 * i + 1]] ^ pre[qs[2 * i] - 1]) for i in range(q))


@task("difference-array", "Painting the Fence",
      "A fence has N boards, all with 0 coats of paint. Each of Q painters paints boards l to r (1-based, inclusive) once. How many coats does each board have at the end?",
      "The first line holds N and Q (1 <= N, Q <= 2*10^5). Each of the next Q lines holds l and r.",
      "Print N numbers.",
      "6 3\n1 3\n2 5\n5 6")
def _(s):
    v = ints(s)
    n, q = v[0], v[1]
    diff = [0] * (n + 2)
    for i in range(q):
        diff[v[2 + 2 * i]] += 1
        diff[v[3 + 2 * i] + 1] -= 1
    out, cur = [], 0
    for i in range(1, n + 1):
        cur += diff[i]
        out.append(cur)
    return join(out)


@task("matrix-prefix-sums", "Rectangle Sums",
      "Answer queries on a grid of numbers: each asks for the sum of the rectangle from row r1, column c1 to row r2, column c2 (1-based, inclusive).",
      "The first line holds R, C and Q (1 <= R, C <= 1000, 1 <= Q <= 10^5). The next R lines hold the grid, then Q lines each hold r1 c1 r2 c2.",
      "Print one answer per line.",
      "3 3 2\n1 2 3\n4 5 6\n7 8 9\n1 1 2 2\n2 2 3 3")
def _(s):
    lines = rows(s)
    r, c, q = ints(lines[0])
    g = [ints(x) for x in lines[1:1 + r]]
    pre = [[0] * (c + 1) for _ in range(r + 1)]
    for i in range(r):
        for j in range(c):
            pre[i + 1][j + 1] = g[i][j] + pre[i][j + 1] + pre[i + 1][j] - pre[i][j]
    out = []
    for line in lines[1 + r:1 + r + q]:
        r1, c1, r2, c2 = ints(line)
        out.append(pre[r2][c2] - pre[r1 - 1][c2] - pre[r2][c1 - 1] + pre[r1 - 1][c1 - 1])
    return "\n".join(map(str, out))


@task("min-stack", "Stack with Minimum",
      "Process stack operations: PUSH x, POP (remove the top element) and MIN (print the smallest element on the stack). POP and MIN are never given on an empty stack.",
      "The first line holds N (1 <= N <= 2*10^5). Each of the next N lines holds an operation.",
      "Print the answer to each MIN on its own line.",
      "7\nPUSH 5\nPUSH 3\nMIN\nPUSH 7\nPOP\nPOP\nMIN")
def _(s):
    stack, out = [], []
    for line in rows(s)[1:]:
        parts = line.split()
        if parts[0] == "PUSH":
            x = int(parts[1])
            stack.append(min(x, stack[-1]) if stack else x)
        elif parts[0] == "POP":
            stack.pop()
        else:
            out.append(str(stack[-1]))
    return "\n".join(out)


@task("priority-queue-ops", "Hospital Queue",
      "Patients arrive with an urgency level; the doctor always treats the most urgent waiting patient, and among equally urgent patients the one who arrived first. Process ARRIVE name urgency and TREAT events and print who is treated.",
      "The first line holds N (1 <= N <= 2*10^5). Each of the next N lines holds an event; TREAT never happens when nobody waits.",
      "Print the name of each treated patient on its own line.",
      "6\nARRIVE ann 3\nARRIVE bob 5\nARRIVE cid 5\nTREAT\nARRIVE dee 9\nTREAT")
def _(s):
    heap, out, order = [], [], 0
    for line in rows(s)[1:]:
        parts = line.split()
        if parts[0] == "ARRIVE":
            heappush(heap, (-int(parts[2]), order, parts[1]))
            order += 1
        else:
            out.append(heappop(heap)[2])
    return "\n".join(out)


@task("queue-two-stacks", "Ticket Queue",
      "Simulate a queue of ticket numbers: ADD x puts x at the back, SERVE removes the front, and FRONT prints the front. SERVE and FRONT are never given on an empty queue.",
      "The first line holds N (1 <= N <= 2*10^5). Each of the next N lines holds an operation.",
      "Print the answer to each FRONT on its own line.",
      "6\nADD 42\nADD 14\nFRONT\nSERVE\nADD 28\nFRONT")
def _(s):
    q, out = deque(), []
    for line in rows(s)[1:]:
        parts = line.split()
        if parts[0] == "ADD":
            q.append(parts[1])
        elif parts[0] == "SERVE":
            q.popleft()
        else:
            out.append(q[0])
    return "\n".join(out)


@task("bracket-repair", "Fixing Parentheses",
      "What is the minimum number of parentheses that must be inserted into a string of '(' and ')' to make it balanced?",
      "One line with a string of parentheses (1 to 10^5 characters).",
      "Print the minimum number of insertions.",
      "())(((")
def _(s):
    open_, need = 0, 0
    for ch in s.strip():
        if ch == "(":
            open_ += 1
        elif open_:
            open_ -= 1
        else:
            need += 1
    return str(need + open_)


@task("simplify-path", "Simplifying a Path",
      "Simplify a Unix-style absolute path: '.' means the current directory, '..' the parent (the parent of the root is the root), and repeated slashes count as one.",
      "One line with an absolute path (at most 10^4 characters).",
      "Print the simplified canonical path.",
      "/home//user/./docs/../photos/")
def _(s):
    stack = []
    for part in s.strip().split("/"):
        if part == "..":
            if stack:
                stack.pop()
        elif part and part != ".":
            stack.append(part)
    return "/" + "/".join(stack)


@task("version-compare", "Comparing Versions",
      "Compare two version numbers made of dot-separated integers, such as 1.10.2. Missing parts count as 0, and leading zeros in a part are ignored.",
      "Two lines, each with a version number.",
      "Print -1 if the first version is smaller, 1 if it is larger, and 0 if they are equal.",
      "1.10.0\n1.9.12")
def _(s):
    a, b = (list(map(int, r.split("."))) for r in rows(s))
    n = max(len(a), len(b))
    a += [0] * (n - len(a))
    b += [0] * (n - len(b))
    return "-1" if a < b else "1" if a > b else "0"


@task("ip-validation", "Valid IPv4 Address",
      "An IPv4 address has four decimal numbers from 0 to 255 separated by dots, with no leading zeros (0 itself is allowed). Check each line.",
      "The first line holds N (1 <= N <= 1000). Each of the next N lines holds a string.",
      "Print VALID or INVALID for each string.",
      "4\n192.168.1.1\n256.1.1.1\n10.01.0.1\n1.2.3")
def _(s):
    out = []
    for line in rows(s)[1:]:
        parts = line.split(".")
        ok = len(parts) == 4 and all(p.isdigit() and str(int(p)) == p and int(p) <= 255 for p in parts)
        out.append("VALID" if ok else "INVALID")
    return "\n".join(out)


@task("count-and-group-files", "File Extensions",
      "Group file names by extension (the part after the last dot, in lower case; a name without a dot has extension NONE) and report how many files of each extension there are, most common first; ties are ordered by the extension in character-code order, so NONE comes before lower-case extensions.",
      "The first line holds N (1 <= N <= 10^5). Each of the next N lines holds a file name.",
      "Print one line per extension with its count.",
      "6\nreport.PDF\nphoto.jpg\nnotes.txt\narchive.tar.gz\nREADME\nscan.pdf")
def _(s):
    c = Counter((line.rsplit(".", 1)[1].lower() if "." in line else "NONE") for line in rows(s)[1:])
    return "\n".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


@task("staircase-with-costs", "Min Cost Climbing",
      "Each step of a staircase has a cost paid when you step on it. You may start on step 1 or step 2, and from any step climb one or two steps. What is the minimum cost to get past the top step?",
      "The first line holds N (2 <= N <= 10^5). The second line holds N costs.",
      "Print the minimum cost.",
      "10\n1 100 1 1 1 100 1 1 100 1")
def _(s):
    c = ints(s)[1:]
    a, b = 0, 0
    for i in range(2, len(c) + 1):
        a, b = b, min(b + c[i - 1], a + c[i - 2])
    return str(b)


@task("maximum-gap-sorted", "Largest Gap",
      "After sorting a list, what is the largest difference between two consecutive elements?",
      "The first line holds N (2 <= N <= 2*10^5). The second line holds N integers.",
      "Print the largest gap.",
      "6\n3 6 9 1 17 12")
def _(s):
    a = sorted(ints(s)[1:])
    return str(max(a[i + 1] - a[i] for i in range(len(a) - 1)))


# ---------------------------------------------------------------------------------------------
# Calendars and displays


@task("day-of-week", "What Day Was It?",
      "Print the day of the week of a date in the Gregorian calendar.",
      "One line with a date in the form YYYY-MM-DD (1583 <= YYYY <= 9999).",
      "Print the English name of the day, such as Monday.",
      "1969-07-20")
def _(s):
    y, m, d = map(int, s.strip().split("-"))
    if m < 3:
        m += 12
        y -= 1
    h = (d + 13 * (m + 1) // 5 + y + y // 4 - y // 100 + y // 400) % 7
    return ["Saturday", "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday"][h]


@task("spreadsheet-column-number", "Spreadsheet Column Number",
      "Spreadsheet columns are labelled A, B, ..., Z, AA, AB, ..., AZ, BA, and so on. Print the number of a column given its label (A is 1, Z is 26, AA is 27).",
      "One line with a label of 1 to 12 upper-case letters.",
      "Print the column number.",
      "ZY")
def _(s):
    n = 0
    for ch in s.strip():
        n = n * 26 + ord(ch) - 64
    return str(n)


@task("spreadsheet-column-label", "Spreadsheet Column Label",
      "Spreadsheet columns are labelled A, B, ..., Z, AA, AB, ..., AZ, BA, and so on. Print the label of column N (1 is A, 26 is Z, 27 is AA).",
      "One line with an integer N (1 <= N <= 10^15).",
      "Print the label.",
      "731")
def _(s):
    n, out = int(s), ""
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


@task("seven-segment", "Seven-Segment Display",
      "A seven-segment display lights 6 segments for the digit 0, 2 for 1, 5 for 2, 5 for 3, 4 for 4, 5 for 5, 6 for 6, 3 for 7, 7 for 8 and 6 for 9. How many segments are lit to show a number, and which of its digits lights the most segments (the first such digit from the left)?",
      "One line with a number of 1 to 10^5 digits (leading zeros allowed).",
      "Print the total number of lit segments and the digit.",
      "20240917")
def _(s):
    seg = [6, 2, 5, 5, 4, 5, 6, 3, 7, 6]
    d = s.strip()
    best = max(d, key=lambda c: seg[int(c)])
    return f"{sum(seg[int(c)] for c in d)} {best}"
