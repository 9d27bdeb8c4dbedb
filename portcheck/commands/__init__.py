"""One module per `portcheck` subcommand (see portcheck/cli.py for the contract)."""
