"""`python -m kwire`: the `kwire` command."""

from kwire.cli import entry

if __name__ == "__main__":
    entry()
