"""reg-swap.swir's expected output, by numpy: A (64 CPEs x 8 doubles) with, in
every row of CPEs, doubles 0..3 of columns 0 and 7 swapped, then in every
column, doubles 2..5 of rows 2 and 5 swapped. Prints whether the emulation's
output (argv[2]) is that, from the input (argv[1])."""
import sys

import numpy as np

a = np.fromfile(sys.argv[1], "<f8").reshape(8, 8, 8)     # [row, column, double]
out = np.fromfile(sys.argv[2], "<f8").reshape(8, 8, 8)
want = a.copy()
want[:, [0, 7], 0:4] = want[:, [7, 0], 0:4]
want[[2, 5], :, 2:6] = want[[5, 2], :, 2:6]
print("swapped as numpy swaps:", bool((out == want).all()))
