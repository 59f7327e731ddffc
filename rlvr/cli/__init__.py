"""The `rlvr` command: one module per subcommand (main.py parses and dispatches; each other module
registers its own subparser). Nothing else in rlvr imports this package."""
