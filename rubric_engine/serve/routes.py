"""Every route of the app in one table (docs/review.md "Pages"). A POST route reads its form
through :meth:`~rubric_engine.serve.app.Pages.posted`, which checks the CSRF token; a test
walks this table to prove each one refuses a request without it."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rubric_engine.serve.auth import AuthPages
from rubric_engine.serve.team_routes import TeamPages

__all__ = ["AllPages", "routes"]


class AllPages(TeamPages, AuthPages):
    """Every page of the app."""

    async def old_queue(self, request: Request) -> Response:
        """``/tasks/T/queue`` (before queues had names) → the task's queues."""
        task = quote(request.path_params["task"], safe="")
        return RedirectResponse(f"/tasks/{task}/queues", status_code=303)


def routes(pages: AllPages) -> list[Route]:
    task = "/tasks/{task}"
    row = "{row_id:path}"
    return [
        Route("/", pages.tasks),
        Route("/signin", pages.signin_form, methods=["GET"]),
        Route("/signin", pages.signin, methods=["POST"]),
        Route("/signout", pages.signout, methods=["POST"]),
        Route("/account", pages.account_page, methods=["GET"]),
        Route("/account", pages.set_account_password, methods=["POST"]),
        Route("/team", pages.team, methods=["GET"]),
        Route("/team", pages.team_change, methods=["POST"]),
        Route("/compare", pages.compare),
        Route(f"{task}/report", pages.report),
        Route(f"{task}/queue", pages.old_queue),
        Route(f"{task}/queues", pages.queues_page, methods=["GET"]),
        Route(f"{task}/queues", pages.create_queue_route, methods=["POST"]),
        Route(f"{task}/queues/{{queue}}", pages.queue_page, methods=["GET"]),
        Route(f"{task}/queues/{{queue}}/settings", pages.queue_settings, methods=["POST"]),
        Route(f"{task}/queues/{{queue}}/agreement", pages.agreement, methods=["GET"]),
        Route(f"{task}/review/{row}", pages.review, methods=["GET"]),
        Route(f"{task}/review/{row}", pages.submit, methods=["POST"]),
        Route(f"{task}/skip/{row}", pages.skip, methods=["POST"]),
        Route(f"{task}/draft/{row}", pages.draft, methods=["POST"]),
        Route(f"{task}/rows/{row}", pages.row, methods=["GET"]),
        Route(f"{task}/adjudicate", pages.adjudication_list, methods=["GET"]),
        Route(f"{task}/adjudicate/{row}", pages.adjudicate, methods=["GET"]),
        Route(f"{task}/adjudicate/{row}", pages.settle, methods=["POST"]),
        Route(f"{task}/reopen/{row}", pages.reopen, methods=["POST"]),
    ]
