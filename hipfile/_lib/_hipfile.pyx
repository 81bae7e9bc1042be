# cython: language_level=3
def placeholder():
    return 0
