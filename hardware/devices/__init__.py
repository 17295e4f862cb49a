"""Teleop devices: keyboard, SpaceMouse, gamepad and scripted operators behind one interface."""
