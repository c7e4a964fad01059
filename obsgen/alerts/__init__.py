"""Alert families: one module per family, each exposing ``NAME`` and ``build(ctx)``.

The module docstring of a family is the source of its reference docs and runbooks:
an overview, then one ``## Alert_Name`` section per alert with a ``Check first:`` list.
"""
