"""Divisors of a 64-bit integer by prime factorisation (the search's degree enumeration).

Trial division up to ``n`` (or ``sqrt(n)``) takes hours on a large prime near 2^63. Here
primality is decided by deterministic Miller-Rabin (the first 12 primes as bases are exact
for every n < 3.3·10^24, Sorenson & Webster 2015) and composites are split by
Pollard's rho with Brent's cycle detection (Brent 1980), so any n < 2^64 factors in
milliseconds; the divisors are then the products of the prime powers (at most 103,680 of
them below 2^64).
"""

from __future__ import annotations

import math
from collections import Counter

from echo_sim.errors import ConfigError

__all__ = ["MAX_DIVISOR_INPUT", "divisors", "prime_factors"]

MAX_DIVISOR_INPUT = 2**64 - 1
"""Largest value :func:`divisors` accepts."""

_SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _SMALL_PRIMES:  # deterministic for n < 3.3e24
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the odd composite ``n`` (Pollard-Brent)."""
    for c in range(1, n):
        y, m, g, r, q = 2, 128, 1, 1, 1
        x = ys = y
        while g == 1:
            x = y
            for _ in range(r):
                y = (y * y + c) % n
            k = 0
            while k < r and g == 1:
                ys = y
                for _ in range(min(m, r - k)):
                    y = (y * y + c) % n
                    q = q * abs(x - y) % n
                g = math.gcd(q, n)
                k += m
            r *= 2
        if g == n:  # the batch overshot: step one at a time from the saved point
            g = 1
            while g == 1:
                ys = (ys * ys + c) % n
                g = math.gcd(abs(x - ys), n)
        if g != n:
            return g
    raise ArithmeticError(f"no factor of {n} found")  # unreachable for composite n


def prime_factors(n: int) -> Counter[int]:
    """``n``'s prime factorisation as {prime: exponent} (empty for 1)."""
    _check(n)
    out: Counter[int] = Counter()
    for p in _SMALL_PRIMES:
        while n % p == 0:
            out[p] += 1
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            out[m] += 1
            continue
        f = _rho(m)
        stack += [f, m // f]
    return out


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` (1 <= n < 2^64) in increasing order."""
    out = [1]
    for p, e in prime_factors(n).items():
        out = [d * p**k for d in out for k in range(e + 1)]
    return sorted(out)


def _check(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_DIVISOR_INPUT:
        raise ConfigError(f"divisors of {n!r}: valid: an integer in 1..2^64-1")
