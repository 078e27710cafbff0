package main

func (c *command) importEnvoy(args []string) error { return nil }
