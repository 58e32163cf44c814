"""Shape lists shared by the test files (TESTING.md, 'Inputs every kernel must survive')."""

SMALL = (1, 7, 16, 17, 33, 100, 129)


def small_triples():
    """14 (M, N, K) triples in which every value of SMALL appears in every position at least twice."""
    n = len(SMALL)
    out = []
    for i in range(n):
        out.append((SMALL[i], SMALL[(i + 2) % n], SMALL[(i + 4) % n]))
        out.append((SMALL[i], SMALL[(i + 5) % n], SMALL[(i + 3) % n]))
    return out
