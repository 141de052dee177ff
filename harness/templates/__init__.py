"""The Jinja2 templates of the run report and of the batch / results indexes (HTML)."""
from jinja2 import Environment, PackageLoader, select_autoescape

TEMPLATES = Environment(loader=PackageLoader("harness", "templates"), autoescape=select_autoescape(["html", "j2"]))
