#!/usr/bin/env bash
# tests/valgrind_memcheck.sh VALGRIND PROGRAM [ARG...] - PROGRAM under valgrind's memcheck; any
# error fails (exit 9).
#
# Memcheck finds the same errors with or without --track-origins=yes: that option only records
# where each undefined value was created, for the report, and doubles the run's time
# (test_decode on sim32: 18.0 CPU s with it, 9.3 without).  So the run that decides is made
# without it, and only when it finds an error is the program run again with it, to print the
# origins (its result does not change the verdict: the first run already failed).
set -u
vg=${1:?usage: valgrind_memcheck.sh VALGRIND PROGRAM [ARG...]}
shift
"$vg" -q --error-exitcode=9 "$@"
rc=$?
if [ "$rc" -eq 9 ]; then
  echo "valgrind_memcheck.sh: memcheck found errors (above); running again with" \
       "--track-origins=yes to show where the undefined values came from"
  "$vg" -q --error-exitcode=9 --track-origins=yes "$@"
fi
exit "$rc"
