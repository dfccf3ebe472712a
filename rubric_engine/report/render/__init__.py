"""Report renderers: JSON and Markdown, HTML, console, JUnit, export, report folders."""
