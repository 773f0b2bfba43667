"""``python -m dr.cli``: the same as ``drctl``."""

from dr.cli.drctl import main

if __name__ == "__main__":
    main()
