// Intentionally empty: CivetSSLCompat is loaded with dlopen, never imported. See shim.c.
