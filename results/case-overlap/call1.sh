#!/usr/bin/env bash
# Call 1: inputs made ahead on a pool of their own at a lower priority, and a case's kernel run
# on the campaign's thread beside its reference (not through rayon::join, which waited for the
# pool). hopper-baseline's and the torch example's default campaigns, 1419f6a and this build
# in turn, traced.
. "$(dirname "$0")/common.sh"
campaign kernel:hopper-baseline hopper-baseline 130 1419f6a .carry/before/nvfp4-oracle-1419f6a
campaign kernel:hopper-baseline hopper-baseline 130 ahead-pool .carry/nvfp4-oracle
campaign manifest:torch torch 170 ahead-pool .carry/nvfp4-oracle
campaign manifest:torch torch 170 1419f6a .carry/before/nvfp4-oracle-1419f6a
