from pcheckout.cli.main import entrypoint

entrypoint()
