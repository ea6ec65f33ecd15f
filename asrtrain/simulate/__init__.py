"""The cluster simulator: an event-driven model of a training epoch under each strategy (``asrtrain
simulate``). It imports nothing of the training code: every figure it prints is a prediction from its
inputs. :mod:`.model` holds the inputs and cost formulas, :mod:`.engine` the event engine, :mod:`.epoch`
the SSGD epoch and the rules every strategy keeps, :mod:`.gossip` the ADPSGD and H-ADPSGD epochs,
:mod:`.report` the tables, records and plots."""
