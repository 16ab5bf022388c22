"""The static web page (HTML, JS, CSS) the service serves at /; a package only so its files install."""
