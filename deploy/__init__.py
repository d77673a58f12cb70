"""Ways to run rmqtx as a service: an OCI image (Containerfile, or built locally by ``deploy.image``)."""
