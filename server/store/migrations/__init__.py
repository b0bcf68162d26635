"""The Alembic environment of the judge's database, applied by `server.store.migrate` (no alembic.ini).

`env.py` is Alembic's entry point; `versions/` holds one module per revision, named
`<id>_<slug>.py` with short numeric ids ("0001", "0002", ...). To write a new one, migrate a
database to the current head, change the models in `server/store/db.py`, then let Alembic draft it::

    .venv/bin/python -c "from alembic import command; from server.store.migrate import config; \\
        command.revision(config('sqlite:///data/remat-judge.db'), 'what changes', autogenerate=True, rev_id='0003')"

and finish it by hand: autogenerate does not see CHECK constraints (the enum columns' values),
and every operation must keep the rows and work on SQLite (batch mode) and PostgreSQL.
"""
