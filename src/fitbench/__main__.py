"""`python -m fitbench` is the same as the `fitbench` command."""

from fitbench.cli.main import main

raise SystemExit(main())
