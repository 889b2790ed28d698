"""``python -m neardup`` runs the command line."""

from neardup._launch import main

if __name__ == "__main__":
    main()
