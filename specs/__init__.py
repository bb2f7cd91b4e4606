"""Data files shipped with perfmodel: devices/, models/, calibration/, measurements/."""
