"""The `remat-judge` command line (Typer): one app, its commands grouped by what they work on.

`serve` and `worker` (server.cli.serve), `grade` (server.cli.grade), `problems ...`
(server.cli.problems; `add` in server.cli.packages),
`users ...` and `clients ...` (server.cli.accounts), `db ...` (server.cli.db), `lti ...`
(server.cli.lti), `courses ...` and `problems regrade|regrades` (server.cli.courses). What they
share (consoles, exit codes, settings, the database) is in server.cli.common.
"""

from __future__ import annotations

import typer

from server.cli import accounts, boards, courses, frontier, grade, packages, passwords, problem_new, problems, serve
from server.cli.db import db_app
from server.cli.lti import lti_app

app = typer.Typer(
    help="remat-judge: an online judge for JAX gradient-checkpointing exercises.",
    no_args_is_help=True,
    add_completion=False,
)
app.command()(serve.serve)
app.command()(serve.worker)
app.command("grade")(grade.grade_file)
app.add_typer(problems.problems_app, name="problems")
app.add_typer(accounts.users_app, name="users")
app.add_typer(db_app, name="db")
app.add_typer(accounts.clients_app, name="clients")
app.add_typer(lti_app, name="lti")
app.add_typer(courses.courses_app, name="courses")
accounts.users_app.command("reset-password")(passwords.reset_password)
problems.problems_app.command("add")(packages.problems_add)
problems.problems_app.command("frontier")(frontier.problems_frontier)
problems.problems_app.command("new")(problem_new.problems_new)
courses.courses_app.command("board")(boards.board_names)
courses.courses_app.command("board-show")(boards.board_show)
problems.problems_app.command("regrade")(courses.regrade)
problems.problems_app.command("regrades")(courses.regrades)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
