"""ROS 2 nodes that compose the robot interface (``hardware.ros2``) with the simulator, the
policies and the training code: the policy, recorder, teleop and sim robot nodes and the
``ros2`` backend of ``train-rl``/``eval``. ``hardware`` itself imports none of those packages."""
