#!/usr/bin/env node
import "../dist/cli.mjs";
