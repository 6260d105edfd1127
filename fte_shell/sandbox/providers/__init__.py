"""The sandbox providers (the deployment side): one package per engine that starts boxes — ``docker/``,
``podman/``, ``bwrap/`` — each holding ``provider.PROVIDER`` (:func:`fte_shell.sandbox.base.get_provider`).
The runtime (facade, session, output, gateway, ownership, hardening, image_inputs) never imports them."""
