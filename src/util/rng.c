// rng — splitmix64 (Steele, Lea and Flood 2014): a counter stepped by the
// golden ratio, then mixed by two xor-shift-multiplies and a final shift.
#include "rng.h"

uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rng_uniform(uint64_t *state) {
    return ((rng_next(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
