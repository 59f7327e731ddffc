"""The code verifier: the reference's asserts are parsed and evaluated by the trusted parent; the candidate runs
in a bubblewrap sandbox (sandbox*.py) that reports call results over a channel (wire.py)."""
