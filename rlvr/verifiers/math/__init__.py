"""The math verifier: extract the final answer, parse it (numbers, LaTeX, sets, intervals) and compare it
symbolically with the reference, in a worker process with a deadline."""
