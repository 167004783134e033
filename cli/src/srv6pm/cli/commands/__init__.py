"""One module per resource of the API; each is a Typer sub-application (`srv6pm nodes ...`)."""
