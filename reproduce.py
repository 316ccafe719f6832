"""The papers' claims at small scale: python reproduce.py --help (experiments/reproduce.py)."""

from experiments.reproduce import main

if __name__ == "__main__":
    main()
