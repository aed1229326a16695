"""Prediction: the fit (GPs and PowerTrain's networks), the model and its files, the roofline prior."""
