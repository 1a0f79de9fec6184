"""A discrete-event simulation of routing diffusion requests over many engine replicas
(testing/sim_routing.py is its command line; docs/scale.md its results). Python and numpy only."""
