"""``rubric-eval serve``: a local web app over the task store (issue 13 item 1).

Starlette with jinja2 pages rendered on the server and a few lines of inline JavaScript for the
keyboard; no build step. An optional extra (``pip install 'rubric-engine[serve]'``), imported
only by the ``serve`` command, so ``rubric-eval --help`` never loads it.
"""
