"""Hardware: ROS 2 transport, robot env over ROS 2, teleop devices, cameras, node entry points."""
