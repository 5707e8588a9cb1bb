"""``python -m limno``: the ``limno`` command."""

from limno.cli import main

if __name__ == "__main__":
    main()
