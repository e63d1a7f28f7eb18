"""``mlfabric dashboard``: the running fabric in the browser, live (:mod:`.server`), from the
switch ports' own byte counters (:mod:`.rates`)."""
