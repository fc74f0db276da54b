"""MIND's version, in a module of its own: the layers below the package's front door (``mind``
itself, which imports the frontend) read it without importing the front door."""

__version__ = "0.1.0"
