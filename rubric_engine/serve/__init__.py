"""``rubric-eval serve``: the review web app over the task store.

Starlette with jinja2 pages rendered on the server and a few lines of inline JavaScript for the
keyboard; no build step. An optional extra (``pip install 'rubric-engine[serve]'``), imported
only by the ``serve`` command, so ``rubric-eval --help`` never loads it.
"""
