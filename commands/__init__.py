"""The command line's glue: click commands that parse options, call the library (``sim``, ``reports``,
``executor``, ``conformance``) and print. Nothing here decides a result; ``main`` assembles the group that
``cli.py`` runs."""
