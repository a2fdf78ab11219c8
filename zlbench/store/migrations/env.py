"""Alembic environment of the zlbench store. zlbench.store.db runs the migrations with its own
open connection (config.attributes["connection"]); there is no alembic.ini to edit."""

from alembic import context

from zlbench.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
