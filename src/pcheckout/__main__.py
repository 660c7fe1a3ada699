from pcheckout.cli.start import entrypoint

entrypoint()
