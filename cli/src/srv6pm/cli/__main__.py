"""``python -m srv6pm.cli``: the ``srv6pm`` command."""

from .app import main

if __name__ == "__main__":
    main()
