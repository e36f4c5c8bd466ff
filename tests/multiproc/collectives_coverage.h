// The coverage claims of tests/multiproc/README.md ("Collective coverage"), checked against the
// case list build_cases makes, which is exactly what `weft_mp_collectives --list` prints and
// what a run executes. `weft_mp_collectives --coverage` checks 1 to 8 ranks and exits 1 when a
// claim does not hold (ctest mp_collectives_coverage), so a change to the case design that
// breaks a sentence of the README fails the suite instead of leaving the sentence false.
#pragma once

namespace mpt {

// Checks every claim for `nranks` and prints one line per rank count (case counts per part and
// the claims checked) plus one line per unmet claim. Returns the number of unmet claims.
int check_coverage(int nranks);

}  // namespace mpt
