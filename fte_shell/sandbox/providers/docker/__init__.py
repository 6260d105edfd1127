"""The Docker sandbox provider (``[sandbox] provider = "docker"``): :mod:`.provider` (``PROVIDER``),
the container lifecycle (:mod:`.container`), the daemon's API and the shell's exec (:mod:`.api`), the
image (:mod:`.image`) and ``fte-shell sandbox doctor`` (:mod:`.doctor`)."""
