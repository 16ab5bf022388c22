"""One router per resource; each is thin: validate, call the layer below, shape the answer."""
