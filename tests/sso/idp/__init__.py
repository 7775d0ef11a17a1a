"""The tests' own OpenID provider: django-oauth-toolkit in a Django project of its own,
run as a second process (``tests/sso/provider.py`` starts it). Nothing here is Trinity's."""
